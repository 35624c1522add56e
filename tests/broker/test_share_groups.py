"""KIP-932 share group membership through the group coordinator: joining, epochs, the simple
assignment sharing partitions, leaving, session expiry and the group-type rules."""

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.consumer_shard import HeartbeatParams
from broker.coordinator.group.shard import CommitItem, CommitParams
from broker.coordinator.group.share_groups import ShareHeartbeatParams, simple_assign
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from tests.broker.group_support import PARTITIONS, Env, async_test, config, join_params

E = ErrorCode
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


async def _env(topics: dict[str, tuple[uuid.UUID, int]]) -> Env:
    sched = ManualScheduler()
    coord = GroupCoordinator(config(share_session_timeout_ms=10_000), sched, lambda: topics)
    env = Env(coord, sched)
    for p in range(PARTITIONS):
        env.logs[p] = InMemoryRecordLog()
        await coord.load(p, env.logs[p])
    return env


def _hb(
    member: str, epoch: int, topics: tuple[str, ...] | None = None, **kw: Any
) -> ShareHeartbeatParams:
    if epoch == 0 and topics is None:
        topics = ("a",)
    return ShareHeartbeatParams(kw.pop("group", "g"), member, epoch, topic_names=topics, **kw)


def test_simple_assign_shares_partitions_when_members_outnumber_them() -> None:
    out = simple_assign({"m1": ("a",), "m2": ("a",), "m3": ("a",)}, (("a", T1, 2),))
    assert out == {
        "m1": {T1: frozenset({0})},
        "m2": {T1: frozenset({1})},
        "m3": {T1: frozenset({0})},
    }


def test_simple_assign_spreads_partitions_and_respects_subscriptions() -> None:
    out = simple_assign({"m1": ("a",), "m2": ("a", "b")}, (("a", T1, 4), ("b", T2, 1)))
    assert out["m1"] == {T1: frozenset({0, 2})}
    assert out["m2"] == {T1: frozenset({1, 3}), T2: frozenset({0})}


@async_test
async def test_join_epochs_leave_and_session_expiry() -> None:
    env = await _env({"a": (T1, 1)})
    c = env.coord
    r1 = await c.share_group_heartbeat(_hb("m1", 0))
    assert r1.error == E.none and r1.member_epoch == 1 and r1.assignment == {T1: frozenset({0})}
    r2 = await c.share_group_heartbeat(_hb("m2", 0))
    assert r2.member_epoch == 2 and r2.assignment == {T1: frozenset({0})}  # partition 0 shared
    # m1, one epoch behind, catches up; a wrong epoch is fenced; an unknown member refused
    assert (await c.share_group_heartbeat(_hb("m1", 1))).member_epoch == 2
    assert (await c.share_group_heartbeat(_hb("m1", 7))).error == E.fenced_member_epoch
    assert (await c.share_group_heartbeat(_hb("zz", 3))).error == E.unknown_member_id
    assert (await c.share_group_heartbeat(_hb("", 0))).error == E.invalid_request
    assert (await c.share_group_heartbeat(_hb("m3", 0, ()))).error == E.invalid_request
    d = await c.share_group_describe("g")
    assert d.state == "Stable" and d.assignor == "simple"
    assert {m.member_id: m.assignment for m in d.members} == {
        "m1": [(T1, "a", [0])],
        "m2": [(T1, "a", [0])],
    }
    left = await c.share_group_heartbeat(_hb("m2", -1))
    assert left.error == E.none and left.member_epoch == -1
    await env.advance(10_001)  # m1 stops heartbeating: its session ends
    d = await c.share_group_describe("g")
    assert d.state == "Empty" and d.members == []
    _err, listed = await c.list_groups()
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed] == [
        ("g", "share", "share")
    ]


@async_test
async def test_group_types_do_not_mix() -> None:
    env = await _env({"a": (T1, 1)})
    c = env.coord
    await c.share_group_heartbeat(_hb("m1", 0))
    assert (await c.describe_group("g")).error == E.group_id_not_found  # not a classic group
    consumer = await c.consumer_group_heartbeat(
        HeartbeatParams("g", "x", 0, rebalance_timeout_ms=5000, topic_names=("a",), owned={})
    )
    assert consumer.error == E.group_id_not_found
    joined = await c.join_group(join_params("g"))
    assert joined.error == E.inconsistent_group_protocol
    # and the other way round: a consumer group's id cannot become a share group
    await c.consumer_group_heartbeat(
        HeartbeatParams("cg", "x", 0, rebalance_timeout_ms=5000, topic_names=("a",), owned={})
    )
    r = await c.share_group_heartbeat(_hb("m1", 0, group="cg"))
    assert r.error == E.group_id_not_found and "not a share group" in (r.message or "")
    assert (await c.share_group_describe("cg")).error == E.group_id_not_found


@async_test
async def test_new_partitions_and_topics_start_a_new_epoch() -> None:
    topics = {"a": (T1, 1)}
    sched = ManualScheduler()
    coord = GroupCoordinator(config(), sched, lambda: topics)
    for p in range(PARTITIONS):
        await coord.load(p, InMemoryRecordLog())
    r = await coord.share_group_heartbeat(_hb("m1", 0, ("a", "b")))
    assert r.member_epoch == 1 and r.assignment == {T1: frozenset({0})}
    assert (await coord.share_group_heartbeat(_hb("m1", 1))).assignment is None  # unchanged
    topics["a"] = (T1, 3)  # partitions added
    r = await coord.share_group_heartbeat(_hb("m1", 1))
    assert r.member_epoch == 2 and r.assignment == {T1: frozenset({0, 1, 2})}
    topics["b"] = (T2, 1)  # a subscribed topic created
    r = await coord.share_group_heartbeat(_hb("m1", 2))
    assert r.member_epoch == 3 and r.assignment == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    del topics["a"]  # and deleted
    r = await coord.share_group_heartbeat(_hb("m1", 3))
    assert r.member_epoch == 4 and r.assignment == {T2: frozenset({0})}


@async_test
async def test_share_groups_keep_no_offsets() -> None:
    env = await _env({"a": (T1, 1)})
    c = env.coord
    await c.share_group_heartbeat(_hb("m1", 0))
    commit = CommitParams("g", -1, "", None, -1, [CommitItem("a", 0, 5, -1, None)], 9)
    assert await c.commit_offsets(commit) == [E.group_id_not_found]
    assert (await c.fetch_offsets("g", None))[0] == E.group_id_not_found
    assert (await c.delete_offsets("g", [("a", 0)]))[0] == E.group_id_not_found
    # and DeleteGroups removes an empty one only
    assert (await c.delete_groups(["g"]))["g"] == E.non_empty_group
    await c.share_group_heartbeat(_hb("m1", -1))
    assert (await c.delete_groups(["g"]))["g"] == E.none
    assert (await c.share_group_describe("g")).error == E.group_id_not_found


@async_test
async def test_reload_restores_members_epochs_and_assignments() -> None:
    topics = {"a": (T1, 2)}
    sched = ManualScheduler()
    logs = {p: InMemoryRecordLog() for p in range(PARTITIONS)}
    coord = GroupCoordinator(config(share_session_timeout_ms=10_000), sched, lambda: topics)
    for p in range(PARTITIONS):
        await coord.load(p, logs[p])
    await coord.share_group_heartbeat(_hb("m1", 0))
    r2 = await coord.share_group_heartbeat(_hb("m2", 0))
    r1 = await coord.share_group_heartbeat(_hb("m1", 1))
    await coord.share_group_heartbeat(_hb("m3", 0))
    await coord.share_group_heartbeat(_hb("m3", -1))  # left: tombstones
    before = await coord.share_group_describe("g")
    # another coordinator loads the same log: same group, members, epochs, assignments
    sched2 = ManualScheduler()
    other = GroupCoordinator(config(share_session_timeout_ms=10_000), sched2, lambda: topics)
    for p in range(PARTITIONS):
        await other.load(p, logs[p])
    after = await other.share_group_describe("g")
    assert (after.epoch, after.state) == (before.epoch, "Stable")
    as_tuples = lambda d: sorted((m.member_id, m.member_epoch, m.assignment) for m in d.members)  # noqa: E731
    assert as_tuples(after) == as_tuples(before)
    assert {m.member_id for m in after.members} == {"m1", "m2"}
    # members go on with their epochs, no new assignment (nothing changed)
    again = await other.share_group_heartbeat(_hb("m2", r2.member_epoch + 2))
    assert again.error == E.fenced_member_epoch
    m1_epoch = next(m.member_epoch for m in after.members if m.member_id == "m1")
    r1b = await other.share_group_heartbeat(_hb("m1", m1_epoch))
    assert (
        r1b.error == E.none and r1b.assignment is None and r1b.member_epoch == r1.member_epoch + 2
    )
    # and sessions run again: silent members leave
    env = Env(other, sched2)
    await env.advance(10_001)
    assert (await other.share_group_describe("g")).members == []


@async_test
async def test_offsets_change_only_without_members() -> None:
    """AlterShareGroupOffsets makes a missing group (empty, kept on reload), delete does not;
    both are refused while the group has members or when the id is another type's."""
    env = await _env({"a": (T1, 1)})
    c = env.coord
    assert await c.share_group_offsets_change("g", create=False) == (
        E.group_id_not_found,
        "Group g not found.",
    )
    assert (await c.share_group_offsets_change("g", create=True))[0] == E.none
    assert (await c.share_group_describe("g")).state == "Empty"
    assert (await c.share_group_offsets_change("g", create=False))[0] == E.none
    await c.share_group_heartbeat(_hb("m1", 0))
    assert (await c.share_group_offsets_change("g", create=True))[0] == E.non_empty_group
    assert (await c.share_group_offsets_change("g", create=False))[0] == E.non_empty_group
    await c.consumer_group_heartbeat(
        HeartbeatParams("cg", "x", 0, rebalance_timeout_ms=5000, topic_names=("a",), owned={})
    )
    assert (await c.share_group_offsets_change("cg", create=True))[0] == E.group_id_not_found
    # the made group survives a reload (its record is in __consumer_offsets)
    await c.share_group_offsets_change("made", create=True)
    p = c.partition_for("made")
    await c.unload(p)
    await c.load(p, env.logs[p])
    assert (await c.share_group_describe("made")).state == "Empty"

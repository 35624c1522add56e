"""Record 15 (ShareGroupStatePartitionMetadata) of share groups: its bytes, what heartbeats,
offset changes and DeleteGroups write to it, and DeleteGroups deleting the share-partitions'
state at the share coordinator before the group's tombstones."""

import struct
import uuid

from kio.schema.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group import share_state_partitions as ssp
from broker.coordinator.group.share_groups import ShareHeartbeatParams
from broker.coordinator.runtime import CoordinatorError, InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from tests.broker.group_support import PARTITIONS, Env, async_test, config

E = ErrorCode
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": (T1, 2), "b": (T2, 1)}


async def _env() -> Env:
    sched = ManualScheduler()
    coord = GroupCoordinator(config(share_session_timeout_ms=10_000), sched, lambda: TOPICS)
    env = Env(coord, sched)
    for p in range(PARTITIONS):
        env.logs[p] = InMemoryRecordLog()
        await coord.load(p, env.logs[p])
    return env


def _join(member: str, topics: tuple[str, ...] = ("a",)) -> ShareHeartbeatParams:
    return ShareHeartbeatParams("g", member, 0, topic_names=topics)


def _leave(member: str) -> ShareHeartbeatParams:
    return ShareHeartbeatParams("g", member, -1)


async def _parts(c: GroupCoordinator) -> ssp.StatePartitions | None:
    return await c.runtime.read(c.partition_for("g"), lambda s: s.share.states.parts.get("g"))


def _state_records(env: Env, group: str) -> list[bytes | None]:
    key = ssp.key(group)
    return [v for k, v in env.log_for(group).records if k == key]


def test_record_bytes_round_trip() -> None:
    key = ssp.key("grp")
    # int16 record type 15, then the v0 key: int16 length + the group id (not flexible)
    assert key == struct.pack(">hh", 15, 3) + b"grp"
    assert ssp.decode_group(key) == "grp"
    sp = ssp.StatePartitions(
        initializing={T2: ssp.TopicParts("b", frozenset({0}), 7)},
        initialized={T1: ssp.TopicParts("a", frozenset({0, 1}), 5)},
        deleting={uuid.UUID(int=3): "c"},
    )
    value = ssp.value(sp)
    assert value[:2] == b"\x00\x00"  # value version 0
    assert ssp.decode_value(value) == sp


def test_set_operations() -> None:
    sp = ssp.add_initializing(ssp.StatePartitions(), {T1: ("a", [0, 1])}, 1)
    sp = ssp.add_initialized(sp, {T1: ("a", [0])}, 2)
    assert sp.initializing == {T1: ssp.TopicParts("a", frozenset({1}), 1)}
    assert sp.initialized == {T1: ssp.TopicParts("a", frozenset({0}), 2)}
    assert sp.known() == {T1: ssp.TopicParts("a", frozenset({0, 1}))}
    sp = ssp.mark_deleting(sp, {T1: "a"})
    assert (sp.initializing, sp.initialized, sp.deleting) == ({}, {}, {T1: "a"})
    assert ssp.drop_deleting(sp, [T1]) == ssp.StatePartitions()


@async_test
async def test_assigned_partitions_stay_known_after_members_leave_and_reload() -> None:
    env = await _env()
    c = env.coord
    assert (await c.share_group_heartbeat(_join("m1"))).error == E.none
    code, init = await c.share_group_initialized("g")
    assert code == E.none and {t: tp.partitions for t, tp in init.items()} == {
        T1: frozenset({0, 1})
    }
    assert init[T1].name == "a" and init[T1].create_timestamp >= 0
    await c.share_group_heartbeat(ShareHeartbeatParams("g", "m1", 1, topic_names=("a", "b")))
    await c.share_group_heartbeat(_leave("m1"))
    assert (await c.share_group_describe("g")).state == "Empty"
    p = c.partition_for("g")
    await c.unload(p)
    await c.load(p, env.logs[p])
    code, init = await c.share_group_initialized("g")
    assert {t: tp.partitions for t, tp in init.items()} == {
        T1: frozenset({0, 1}),
        T2: frozenset({0}),
    }
    assert (await c.share_group_initialized("nope"))[0] == E.group_id_not_found


@async_test
async def test_offset_changes_go_through_initializing_and_deleting() -> None:
    env = await _env()
    c = env.coord
    parts = {T1: ("", [0, 1])}  # no name: the coordinator knows it from the topics
    assert (await c.share_group_offsets_change("g", True, initializing=parts))[0] == E.none
    assert (await _parts(c)).initializing[T1].name == "a"
    assert (await c.share_group_initialized("g"))[1] == {}  # not yet initialized
    assert await c.share_state_change_done("g", {T1: ("a", [0])}, {T1: ("a", [1])}, []) == E.none
    sp = await _parts(c)
    assert sp is not None
    assert sp.initializing == {} and sp.initialized[T1].partitions == {0}
    # delete: the topic is deleting until the share coordinator answered
    assert (await c.share_group_offsets_change("g", False, deleting={T1: "a"}))[0] == E.none
    assert (await _parts(c)).deleting == {T1: "a"}
    assert (await c.share_group_initialized("g"))[1] == {}
    await c.share_state_change_done("g", {}, {}, [T1])
    assert (await _parts(c)) == ssp.StatePartitions()
    # each step was a record 15 of its own
    values = _state_records(env, "g")
    assert len(values) == 4 and all(v is not None for v in values)


@async_test
async def test_delete_groups_deletes_share_state_then_writes_tombstones() -> None:
    env = await _env()
    c = env.coord
    deleted: list[tuple[str, uuid.UUID, int]] = []
    fail = [1]

    async def deleter(group: str, topic_id: uuid.UUID, partition: int) -> None:
        if fail[0]:
            fail[0] -= 1
            raise CoordinatorError(E.coordinator_not_available, "away")
        deleted.append((group, topic_id, partition))

    c.share_state_deleter = deleter
    await c.share_group_heartbeat(_join("m1", ("a", "b")))
    # members: refused, nothing deleted at the share coordinator
    assert await c.delete_groups(["g"]) == {"g": E.non_empty_group}
    await c.share_group_heartbeat(_leave("m1"))
    # the share coordinator fails: the group stays, its topics marked deleting
    assert await c.delete_groups(["g"]) == {"g": E.coordinator_not_available}
    assert (await c.share_group_describe("g")).error == E.none
    assert (await _parts(c)).deleting == {T1: "a", T2: "b"}
    # again: every partition of the deleting topics goes, then the group and its record 15
    assert await c.delete_groups(["g", "ghost"]) == {"g": E.none, "ghost": E.group_id_not_found}
    assert sorted(deleted) == [("g", T1, 0), ("g", T1, 1), ("g", T2, 0)]
    assert (await c.share_group_describe("g")).error == E.group_id_not_found
    assert _state_records(env, "g")[-1] is None  # the tombstone
    assert await _parts(c) is None
    # and a reload agrees
    p = c.partition_for("g")
    await c.unload(p)
    await c.load(p, env.logs[p])
    assert (await c.share_group_initialized("g"))[0] == E.group_id_not_found

"""KIP-848 mixed groups against the sans-IO coordinator: a live classic group upgraded when a
consumer-protocol member joins, classic members reconciling through JoinGroup/SyncGroup/
Heartbeat, the downgrade when the last consumer-protocol member leaves, the migration policy,
and the records that bring a mixed group back on reload."""

import asyncio
import struct
import uuid
from typing import Any

from kio.schema.consumer_protocol_subscription.v3.data import (
    ConsumerProtocolSubscription,
    TopicPartition,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group.classic import JoinResult
from broker.coordinator.group.consumer_shard import HeartbeatParams
from broker.coordinator.group.migration import decode_assignment, encode_assignment
from broker.coordinator.group.shard import CommitItem, CommitParams, JoinParams, SyncParams
from broker.coordinator.record_framing import encode_prefixed
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from tests.broker.group_support import PARTITIONS, Env, async_test, config, start_join

E = ErrorCode
T1 = uuid.UUID(int=11)
TOPICS = {"t1": (T1, 4)}


async def _env(logs: dict[int, InMemoryRecordLog] | None = None, **cfg: Any) -> Env:
    sched = ManualScheduler()
    base: dict[str, Any] = {"consumer_session_timeout_ms": 60_000} | cfg
    coord = GroupCoordinator(config(**base), sched, lambda: TOPICS)
    env = Env(coord, sched)
    for p in range(PARTITIONS):
        env.logs[p] = logs[p] if logs else InMemoryRecordLog()
        await coord.load(p, env.logs[p])
    return env


def _sub(owned: set[int] | None = None) -> bytes:
    parts = (
        (TopicPartition(topic=TopicName("t1"), partitions=tuple(i32(p) for p in sorted(owned))),)
        if owned
        else ()
    )
    return encode_prefixed(
        3,
        ConsumerProtocolSubscription(
            topics=(TopicName("t1"),),
            user_data=None,
            owned_partitions=parts,
            generation_id=i32(-1),
            rack_id=None,
        ),
    )


def _assignment(parts: set[int], user_data: bytes | None = None) -> bytes:
    plain = encode_assignment({T1: frozenset(parts)} if parts else {}, TOPICS, _sub())
    if user_data is None:
        return plain
    # the same layout with user data in place of the null (-1) at its end
    return plain[:-4] + struct.pack(">i", len(user_data)) + user_data


def _join(
    member_id: str = "", owned: set[int] | None = None, session_ms: int = 10_000
) -> JoinParams:
    return JoinParams(
        group_id="g",
        member_id=member_id,
        group_instance_id=None,
        client_id="classic",
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=20_000,
        protocol_type="consumer",
        protocols=[("cooperative-sticky", _sub(owned)), ("range", _sub(owned))],
        require_known_member_id=False,
        supports_skip_assignment=True,
    )


def _hb(member: str, epoch: int, owned: set[int] | None = None) -> HeartbeatParams:
    if epoch == 0:
        return HeartbeatParams(
            "g", member, 0, rebalance_timeout_ms=20_000, topic_names=("t1",), owned={}
        )
    return HeartbeatParams("g", member, epoch, owned={T1: frozenset(owned or set())})


async def _classic_group(env: Env, user_data: bytes | None = None) -> tuple[str, str]:
    """Two classic members, a with partitions 0-1 and b with 2-3, stable at generation 1."""
    c = env.coord
    tasks = [start_join(env, _join()) for _ in range(2)]
    await env.advance(3000)
    await env.advance(3000)
    joins: list[JoinResult] = [await t for t in tasks]
    assert {j.error for j in joins} == {E.none} and joins[0].generation_id == 1
    a, b = sorted(j.member_id for j in joins)
    plan = {a: _assignment({0, 1}, user_data), b: _assignment({2, 3})}
    leader = joins[0].leader
    syncs = [
        asyncio.ensure_future(
            c.sync_group(
                SyncParams(
                    "g", 1, m, None, "consumer", "cooperative-sticky", plan if m == leader else {}
                )
            )
        )
        for m in (a, b)
    ]
    assert [(await s).error for s in syncs] == [E.none, E.none]
    return a, b


async def _classic_round(env: Env, member: str, owned: set[int]) -> tuple[int, set[int], ErrorCode]:
    """One JoinGroup + SyncGroup of a classic member reporting `owned`: (generation, the
    partitions the sync hands it, the heartbeat's answer after it)."""
    c = env.coord
    j = await c.join_group(_join(member, owned))
    assert j.error == E.none and j.member_id == member and j.leader == "" and j.members == []
    s = await c.sync_group(
        SyncParams("g", j.generation_id, member, None, "consumer", j.protocol_name, {})
    )
    if s.error == E.rebalance_in_progress:
        return j.generation_id, owned, s.error
    assert s.error == E.none and s.protocol_name == "cooperative-sticky"
    named = decode_assignment(s.assignment)
    assert named is not None
    got = set(named.get("t1", frozenset()))
    return j.generation_id, got, await c.heartbeat("g", j.generation_id, member, None)


async def _settle_classic(
    env: Env, member: str, owned: set[int], rounds: list[tuple[int, set[int]]] | None = None
) -> tuple[int, set[int]]:
    """Join again until the heartbeat has nothing more to say (revocations done); `rounds`
    collects each round's (generation, partitions synced)."""
    for _ in range(5):
        gen, owned, hb = await _classic_round(env, member, owned)
        if rounds is not None:
            rounds.append((gen, owned))
        if hb == E.none:
            return gen, owned
    raise AssertionError(f"{member} does not settle")


async def _mixed_group(env: Env) -> tuple[str, str, set[int], set[int], set[int]]:
    """Upgrade: consumer-protocol member c joins the classic group; everyone settles."""
    c = env.coord
    a, b = await _classic_group(env)
    r = await c.consumer_group_heartbeat(_hb("c", 0))
    # c joins at the next epoch and waits for the partitions the classic members hold
    assert (r.error, r.member_epoch, r.assignment) == (E.none, 2, {})
    # the classic members' generation is behind: they must join again
    assert await c.heartbeat("g", 1, a, None) == E.rebalance_in_progress
    assert await c.heartbeat("g", 1, b, None) == E.rebalance_in_progress
    ra: list[tuple[int, set[int]]] = []
    rb: list[tuple[int, set[int]]] = []
    _, pa = await _settle_classic(env, a, {0, 1}, ra)
    _, pb = await _settle_classic(env, b, {2, 3}, rb)
    # 4 partitions over 3 members: one classic member gives one up. Its first join leaves it at
    # generation 1 with what it keeps (revoking); its next join, without the partition, moves
    # it to generation 2. The other reaches generation 2 at once.
    assert sorted([ra, rb], key=len) in (
        [[(2, {0, 1})], [(1, {2}), (2, {2})]],
        [[(2, {0, 1})], [(1, {3}), (2, {3})]],
        [[(2, {2, 3})], [(1, {0}), (2, {0})]],
        [[(2, {2, 3})], [(1, {1}), (2, {1})]],
    ), (ra, rb)
    r = await c.consumer_group_heartbeat(_hb("c", 2, set()))
    assert r.error == E.none and r.assignment is not None
    pc = set(r.assignment.get(T1, frozenset()))
    return a, b, pa, pb, pc


@async_test
async def test_upgrade_keeps_assignments_and_rebalances_through_classic_rejoins() -> None:
    env = await _env()
    c = env.coord
    a, b, pa, pb, pc = await _mixed_group(env)
    # every partition on exactly one member, each member with some
    assert pa | pb | pc == {0, 1, 2, 3} and len(pa) + len(pb) + len(pc) == 4
    assert pa and pb and pc and pa <= {0, 1} and pb <= {2, 3}
    d = await c.consumer_group_describe("g")
    assert (d.state, d.epoch, d.assignment_epoch) == ("Stable", 2, 2)
    assert {m.member_id: m.classic for m in d.members} == {a: True, b: True, "c": False}
    listed = (await c.list_groups())[1]
    assert [(g.group_id, g.group_type) for g in listed] == [("g", "consumer")]
    classic = await c.describe_group("g")
    assert (classic.protocol_type, len(classic.members)) == ("consumer", 3)
    # the records: the classic group's tombstone, then the members with ClassicMemberMetadata
    log = env.log_for("g").records
    tomb = next(i for i, (k, v) in enumerate(log) if k[:2] == b"\x00\x02" and v is None)
    metas = {
        crec.decode_key(k).member_id: crec.decode_member_metadata(v)  # type: ignore[union-attr]
        for k, v in log[tomb:]
        if k[:2] == b"\x00\x05" and v is not None
    }
    assert metas[a].classic is not None and metas[a].classic.session_timeout_ms == 10_000
    assert [n for n, _ in metas[a].classic.protocols] == ["cooperative-sticky", "range"]
    assert metas["c"].classic is None
    # a classic member commits with its generation (the member epoch), else ILLEGAL_GENERATION
    item = [CommitItem("t1", min(pa), 5, -1, "")]
    assert await c.commit_offsets(CommitParams("g", 2, a, None, -1, item, 8)) == [E.none]
    assert await c.commit_offsets(CommitParams("g", 1, a, None, -1, item, 8)) == [
        E.illegal_generation
    ]
    fetched = await c.fetch_offsets("g", [("t1", [min(pa)])], member=(a, 2))
    assert fetched[0] == E.none and fetched[1][0][1][0].offset == 5
    assert (await c.fetch_offsets("g", None, member=(a, 1)))[0] == E.illegal_generation
    assert (await c.fetch_offsets("g", None, member=("c", 1)))[0] == E.stale_member_epoch


@async_test
async def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    env = await _env()
    c = env.coord
    a, b, pa, pb, _pc = await _mixed_group(env)
    left = await c.consumer_group_heartbeat(_hb("c", -1))
    assert (left.error, left.member_epoch) == (E.none, -1)
    listed = (await c.list_groups())[1]
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [
        ("g", "classic", "PreparingRebalance")
    ]
    assert (await c.consumer_group_describe("g")).error == E.group_id_not_found
    # the classic members are at the group's generation and are told to rejoin
    assert await c.heartbeat("g", 2, a, None) == E.rebalance_in_progress
    ja = start_join(env, _join(a, pa))
    jb = start_join(env, _join(b, pb))
    joins = [await ja, await jb]
    assert {(j.error, j.generation_id) for j in joins} == {(E.none, 3)}
    leader = next(j for j in joins if j.members)
    assert {m[0] for m in leader.members} == {a, b}
    # the group was stored as classic, with the members' last assignments
    fresh = await _env(env.logs)
    again = await fresh.coord.describe_group("g")
    assert {m.member_id for m in again.members} == {a, b}


@async_test
async def test_policy_refuses_conversions_it_does_not_allow() -> None:
    env = await _env(consumer_migration_policy="disabled")
    c = env.coord
    a, _ = await _classic_group(env)
    r = await c.consumer_group_heartbeat(_hb("c", 0))
    assert r.error == E.group_id_not_found and "online upgrade is disabled" in (r.message or "")
    assert (await c.list_groups())[1][0].group_type == "classic"
    assert await c.heartbeat("g", 1, a, None) == E.none  # the classic group goes on
    env = await _env(consumer_migration_policy="downgrade")
    await _classic_group(env)
    assert (await env.coord.consumer_group_heartbeat(_hb("c", 0))).error == E.group_id_not_found
    # a custom assignor's user data in an assignment would be lost: no upgrade
    env = await _env()
    await _classic_group(env, user_data=b"sticky")
    assert (await env.coord.consumer_group_heartbeat(_hb("c", 0))).error == E.group_id_not_found
    # upgrade only: the consumer member leaving does not turn the group back
    env = await _env(consumer_migration_policy="upgrade")
    a, b, *_ = await _mixed_group(env)
    await env.coord.consumer_group_heartbeat(_hb("c", -1))
    listed = (await env.coord.list_groups())[1]
    assert [(g.group_type) for g in listed] == ["consumer"]
    d = await env.coord.consumer_group_describe("g")
    assert {m.member_id for m in d.members} == {a, b}


@async_test
async def test_mixed_group_survives_a_reload_and_classic_sessions_expire() -> None:
    env = await _env()
    a, b, pa, _pb, pc = await _mixed_group(env)
    fresh = await _env(env.logs)
    c = fresh.coord
    d = await c.consumer_group_describe("g")
    by_id = {m.member_id: m for m in d.members}
    assert {m: by_id[m].classic for m in by_id} == {a: True, b: True, "c": False}
    assert {p for _, _, ps in by_id[a].assignment for p in ps} == pa
    assert await c.heartbeat("g", 2, a, None) == E.none
    # the classic members' sessions are their JoinGroup's (10 s), not the consumer one (60 s)
    for _ in range(2):
        await fresh.advance(4000)
        assert await c.heartbeat("g", 2, a, None) == E.none
        assert (await c.consumer_group_heartbeat(_hb("c", 2, pc))).error == E.none
    await fresh.advance(4000)  # b silent for 12 s
    d = await c.consumer_group_describe("g")
    assert {m.member_id for m in d.members} == {a, "c"} and d.epoch == 3
    assert await c.heartbeat("g", 2, a, None) == E.rebalance_in_progress
    # the leave of a classic member through LeaveGroup, then only c is left
    assert await c.leave_group("g", [(a, None), ("c", None)]) == (
        E.none,
        [E.none, E.unknown_member_id],  # c does not use the classic protocol
    )
    d = await c.consumer_group_describe("g")
    assert [m.member_id for m in d.members] == ["c"] and d.epoch == 4


@async_test
async def test_classic_member_joins_a_consumer_group() -> None:
    env = await _env()
    c = env.coord
    r = await c.consumer_group_heartbeat(_hb("c", 0))
    assert r.assignment == {T1: frozenset(range(4))}
    need = await c.join_group(_join_required())
    assert need.error == E.member_id_required and need.member_id
    gen, got, hb = await _classic_round(env, need.member_id, set())
    # c still holds everything: the classic member waits for what c gives up
    assert (gen, got, hb) == (2, set(), E.none)
    r = await c.consumer_group_heartbeat(_hb("c", 1, set(range(4))))
    kept = set(r.assignment.get(T1, frozenset())) if r.assignment else set()
    assert len(kept) == 2
    r = await c.consumer_group_heartbeat(_hb("c", 1, kept))
    assert r.member_epoch == 2
    # released now: the classic member's heartbeat sends it back to join for them
    assert await c.heartbeat("g", 2, need.member_id, None) == E.rebalance_in_progress
    gen, got, hb = await _classic_round(env, need.member_id, set())
    assert (gen, got, hb) == (2, set(range(4)) - kept, E.none)
    # a consumer-protocol subscription is needed to join
    bad = await c.join_group(_join_with(b"junk"))
    assert bad.error == E.inconsistent_group_protocol


def _join_required() -> JoinParams:
    p = _join()
    p.require_known_member_id = True
    return p


def _join_with(metadata: bytes) -> JoinParams:
    p = _join()
    p.protocols = [("range", metadata)]
    return p


@async_test
async def test_upgrade_during_a_classic_rebalance() -> None:
    env = await _env()
    c = env.coord
    a, b = await _classic_group(env)
    joining = start_join(env, _join())  # a third classic member starts a rebalance
    await env.advance(0)
    assert (await c.describe_group("g")).state == "PreparingRebalance"
    r = await c.consumer_group_heartbeat(_hb("c", 0))
    assert r.error == E.none
    # the waiting join is told to join again: into the consumer group now
    waited = await joining
    assert waited.error == E.rebalance_in_progress and waited.member_id
    d = waited.member_id
    members = {m.member_id for m in (await c.consumer_group_describe("g")).members}
    assert members == {a, b, "c", d}
    owned = {a: {0, 1}, b: {2, 3}, d: set()}
    got: set[int] = set()
    for _ in range(4):
        for m in (a, b, d):
            _, owned[m] = await _settle_classic(env, m, owned[m])
        r = await c.consumer_group_heartbeat(_hb("c", r.member_epoch, got))
        got = set(r.assignment.get(T1, frozenset())) if r.assignment is not None else got
        if all(len(owned[m]) == 1 for m in (a, b, d)) and len(got) == 1:
            break
    assert set().union(*owned.values(), got) == {0, 1, 2, 3}
    assert [len(x) for x in (*owned.values(), got)] == [1, 1, 1, 1]


@async_test
async def test_static_classic_member_replacing_the_last_consumer_member_downgrades() -> None:
    env = await _env()
    c = env.coord
    s = await c.consumer_group_heartbeat(
        HeartbeatParams(
            "g",
            "s",
            0,
            instance_id="i1",
            rebalance_timeout_ms=20_000,
            topic_names=("t1",),
            owned={},
        )
    )
    assert s.assignment == {T1: frozenset(range(4))}
    a = (await c.join_group(_join())).member_id  # a classic member: waits for s to revoke
    assert await c.heartbeat("g", 2, a, None) == E.none
    # a classic member id cannot heartbeat through ConsumerGroupHeartbeat
    assert (await c.consumer_group_heartbeat(_hb(a, 2, set()))).error == E.unknown_member_id
    s = await c.consumer_group_heartbeat(_hb("s", 1, set(range(4))))
    kept = set(s.assignment.get(T1, frozenset())) if s.assignment else set()
    s = await c.consumer_group_heartbeat(_hb("s", 1, kept))
    assert s.member_epoch == 2
    _, pa = await _settle_classic(env, a, set())
    assert pa == {0, 1, 2, 3} - kept
    # the instance restarts as a classic consumer: the group becomes classic at once, stable
    # (same subscription), the new member holding what s held
    p = _join()
    p.group_instance_id = "i1"
    j = await c.join_group(p)
    assert (j.error, j.generation_id) == (E.none, 2)
    listed = (await c.list_groups())[1]
    assert [(g.group_type, g.state) for g in listed] == [("classic", "Stable")]
    synced = await c.sync_group(SyncParams("g", 2, j.member_id, "i1", "consumer", None, {}))
    named = decode_assignment(synced.assignment)
    assert synced.error == E.none and named == {"t1": frozenset(kept)}
    assert await c.heartbeat("g", 2, a, None) == E.none
    assert await c.heartbeat("g", 2, j.member_id, "i1") == E.none


@async_test
async def test_classic_member_must_rejoin_and_sync_within_its_rebalance_timeout() -> None:
    env = await _env()
    c = env.coord
    await c.consumer_group_heartbeat(_hb("c", 0))
    a = (await c.join_group(_join())).member_id
    _, pa = await _settle_classic(env, a, set())
    # a joins but never syncs: fenced after its rebalance timeout (20 s), heartbeats or not
    j = await c.join_group(_join(a, pa))
    assert j.error == E.none
    for _ in range(5):
        await env.advance(4500)
        assert await c.heartbeat("g", j.generation_id, a, None) in (E.none, E.unknown_member_id)
    assert a not in {m.member_id for m in (await c.consumer_group_describe("g")).members}
    assert await c.heartbeat("g", j.generation_id, a, None) == E.unknown_member_id
    # b is told to rejoin (d arrives) and keeps heartbeating instead: fenced all the same
    b = (await c.join_group(_join())).member_id
    gen, _ = await _settle_classic(env, b, set())
    await c.consumer_group_heartbeat(_hb("d", 0))
    assert await c.heartbeat("g", gen, b, None) == E.rebalance_in_progress  # 20 s from here
    for _ in range(4):
        await env.advance(4500)
        assert await c.heartbeat("g", gen, b, None) == E.rebalance_in_progress
    await env.advance(2500)
    assert {m.member_id for m in (await c.consumer_group_describe("g")).members} == {"c", "d"}

import asyncio

from kio.schema.errors import ErrorCode

from broker.coordinator.group.shard import CommitItem, CommitParams, SyncParams
from tests.broker.group_support import async_test, config, join_params, make_env, start_join

E = ErrorCode


async def _stable_group(env, n=3, group="g"):  # type: ignore[no-untyped-def]
    tasks = [
        start_join(
            env, join_params(group, client_id=f"c{i}", protocols=[("range", f"m{i}".encode())])
        )
        for i in range(n)
    ]
    await env.advance(0)
    await env.advance(3000)  # initial rebalance delay; members joined meanwhile extend it once
    assert n == 1 or not any(t.done() for t in tasks)
    await env.advance(3000)
    results = [await t for t in tasks]
    leader = results[0].leader
    syncs = [
        asyncio.ensure_future(
            env.coord.sync_group(
                SyncParams(
                    group,
                    r.generation_id,
                    r.member_id,
                    None,
                    "consumer",
                    "range",
                    {x.member_id: x.member_id.encode() for x in results}
                    if r.member_id == leader
                    else {},
                )
            )
        )
        for r in results
    ]
    return results, [await s for s in syncs]


@async_test
async def test_three_members_one_generation_and_sync_distributes() -> None:
    env = await make_env()
    joins, syncs = await _stable_group(env)
    assert {r.error for r in joins} == {E.none}
    assert {r.generation_id for r in joins} == {1}
    leader = joins[0].leader
    assert len({r.member_id for r in joins}) == 3 and leader in {r.member_id for r in joins}
    for r in joins:
        assert r.member_id.startswith("c")
        assert r.protocol_name == "range"
        if r.member_id == leader:
            assert sorted(m[2] for m in r.members) == [b"m0", b"m1", b"m2"]
        else:
            assert r.members == []
    for r, s in zip(joins, syncs, strict=True):
        assert s.error == E.none and s.assignment == r.member_id.encode()
    d = await env.coord.describe_group("g")
    assert d.state == "Stable" and d.protocol_data == "range" and len(d.members) == 3
    # the leader's assignment was persisted as a group metadata record
    assert any(k[:2] == b"\x00\x02" and v is not None for k, v in env.log_for("g").records)


@async_test
async def test_member_leaving_triggers_rebalance() -> None:
    env = await make_env()
    joins, _ = await _stable_group(env)
    gone, *rest = joins
    err, errors = await env.coord.leave_group("g", [(gone.member_id, None)])
    assert (err, errors) == (E.none, [E.none])
    assert await env.coord.heartbeat("g", 1, rest[0].member_id, None) == E.rebalance_in_progress
    assert await env.coord.heartbeat("g", 1, gone.member_id, None) == E.unknown_member_id
    rejoin = [start_join(env, join_params(member_id=r.member_id)) for r in rest]
    results = [await t for t in rejoin]
    assert {r.generation_id for r in results} == {2}
    assert (await env.coord.describe_group("g")).state == "CompletingRebalance"


@async_test
async def test_session_timeout_expires_member_and_rebalances() -> None:
    env = await make_env()
    joins, _ = await _stable_group(env)
    alive = joins[1:]
    for _ in range(3):
        await env.advance(4000)
        for r in alive:
            assert await env.coord.heartbeat("g", 1, r.member_id, None) in (
                E.none,
                E.rebalance_in_progress,
            )
    d = await env.coord.describe_group("g")
    assert d.state == "PreparingRebalance"
    assert joins[0].member_id not in {m.member_id for m in d.members}
    # nobody rejoins: after the rebalance timeout everyone is gone and the group is empty
    await env.advance(60_000)
    d = await env.coord.describe_group("g")
    assert d.state == "Empty" and d.members == []


@async_test
async def test_join_waits_are_bounded_by_rebalance_timeout() -> None:
    env = await make_env()
    joins, _ = await _stable_group(env, n=2)
    a, _b = joins
    # a rejoins (starting a rebalance) but b never does
    t = start_join(env, join_params(member_id=a.member_id, rebalance_ms=20_000))
    await env.advance(0)
    assert not t.done()
    await env.advance(20_000)
    r = await t
    assert r.error == E.none and r.generation_id == 2 and r.leader == a.member_id


@async_test
async def test_static_member_rejoin_keeps_generation() -> None:
    env = await make_env(config(initial_rebalance_delay_ms=0))
    r1 = await env.coord.join_group(join_params(instance="i1"))
    assert r1.error == E.none and r1.generation_id == 1
    s = await env.coord.sync_group(
        SyncParams("g", 1, r1.member_id, "i1", None, None, {r1.member_id: b"A"})
    )
    assert s.assignment == b"A"
    # same instance restarts with no member id: gets a new id, no rebalance
    r2 = await env.coord.join_group(join_params(instance="i1"))
    assert r2.error == E.none and r2.generation_id == 1 and r2.member_id != r1.member_id
    assert r2.skip_assignment and r2.leader == r2.member_id
    assert await env.coord.heartbeat("g", 1, r1.member_id, "i1") == E.fenced_instance_id
    assert await env.coord.heartbeat("g", 1, r2.member_id, "i1") == E.none
    s2 = await env.coord.sync_group(SyncParams("g", 1, r2.member_id, "i1", None, None, {}))
    assert s2.assignment == b"A"


@async_test
async def test_member_id_required_flow() -> None:
    env = await make_env(config(initial_rebalance_delay_ms=0))
    first = await env.coord.join_group(join_params(require_known=True, client_id="cli"))
    assert first.error == E.member_id_required and first.member_id.startswith("cli-")
    second = await env.coord.join_group(join_params(member_id=first.member_id, require_known=True))
    assert (
        second.error == E.none and second.member_id == first.member_id and second.generation_id == 1
    )


@async_test
async def test_validation_errors() -> None:
    env = await make_env()
    assert (await env.coord.join_group(join_params(group=""))).error == E.invalid_group_id
    assert (
        await env.coord.join_group(join_params(session_ms=10))
    ).error == E.invalid_session_timeout
    assert (await env.coord.join_group(join_params(member_id="ghost"))).error == E.unknown_member_id
    assert await env.coord.heartbeat("nope", 1, "x", None) == E.unknown_member_id
    joins, _ = await _stable_group(env, n=1)
    m = joins[0].member_id
    assert await env.coord.heartbeat("g", 7, m, None) == E.illegal_generation
    bad = await env.coord.join_group(join_params(protocols=[("other", b"")]))
    assert bad.error == E.inconsistent_group_protocol
    s = await env.coord.sync_group(SyncParams("g", 1, m, None, "consumer", "roundrobin", {}))
    assert s.error == E.inconsistent_group_protocol


def _commit(group, items, generation=-1, member="", version=8):  # type: ignore[no-untyped-def]
    return CommitParams(
        group,
        generation,
        member,
        None,
        -1,
        [CommitItem(t, p, o, 3, "md") for t, p, o in items],
        version,
    )


@async_test
async def test_offsets_commit_fetch_and_member_checks() -> None:
    env = await make_env()
    assert await env.coord.commit_offsets(_commit("simple", [("t", 0, 10), ("t", 1, 20)])) == [
        E.none,
        E.none,
    ]
    err, found = await env.coord.fetch_offsets("simple", [("t", [0, 1, 2])])
    assert err == E.none
    assert [(o.partition, o.offset, o.leader_epoch, o.metadata) for o in found[0][1]] == [
        (0, 10, 3, "md"),
        (1, 20, 3, "md"),
        (2, -1, -1, ""),
    ]
    _, everything = await env.coord.fetch_offsets("simple", None)
    assert [(t, [o.offset for o in os]) for t, os in everything] == [("t", [10, 20])]
    assert (await env.coord.describe_group("simple")).state == "Empty"
    # an unknown group with a generation
    assert await env.coord.commit_offsets(_commit("x", [("t", 0, 1)], generation=1)) == [
        E.illegal_generation
    ]
    assert await env.coord.commit_offsets(_commit("x", [("t", 0, 1)], generation=1, version=9)) == [
        E.group_id_not_found
    ]
    joins, _ = await _stable_group(env, n=1)
    m = joins[0].member_id
    assert await env.coord.commit_offsets(_commit("g", [("t", 0, 5)], 1, m)) == [E.none]
    assert await env.coord.commit_offsets(_commit("g", [("t", 0, 5)], 2, m)) == [
        E.illegal_generation
    ]
    assert await env.coord.commit_offsets(_commit("g", [("t", 0, 5)], 1, "zz")) == [
        E.unknown_member_id
    ]
    assert await env.coord.commit_offsets(_commit("g", [("t", 0, 5)])) == [E.unknown_member_id]
    big = CommitParams("simple", -1, "", None, -1, [CommitItem("t", 0, 1, -1, "x" * 5000)], 8)
    assert await env.coord.commit_offsets(big) == [E.offset_metadata_too_large]


@async_test
async def test_failed_append_leaves_offsets_untouched() -> None:
    env = await make_env()
    assert await env.coord.commit_offsets(_commit("s", [("t", 0, 1)])) == [E.none]
    env.log_for("s").fail_appends = 1
    assert await env.coord.commit_offsets(_commit("s", [("t", 0, 2)])) == [
        E.coordinator_not_available
    ]
    _, found = await env.coord.fetch_offsets("s", [("t", [0])])
    assert found[0][1][0].offset == 1


@async_test
async def test_failed_leader_sync_answers_error_and_rebalances() -> None:
    env = await make_env(config(initial_rebalance_delay_ms=0))
    r = await env.coord.join_group(join_params())
    env.log_for("g").fail_appends = 1
    s = await env.coord.sync_group(
        SyncParams("g", 1, r.member_id, None, None, None, {r.member_id: b"A"})
    )
    assert s.error == E.coordinator_not_available
    assert (await env.coord.describe_group("g")).state == "PreparingRebalance"


@async_test
async def test_reload_restores_offsets_and_groups() -> None:
    env = await make_env()
    joins, _ = await _stable_group(env, n=2)
    m = joins[0].member_id
    assert await env.coord.commit_offsets(_commit("g", [("t", 0, 42)], 1, m)) == [E.none]
    assert await env.coord.commit_offsets(_commit("s", [("u", 1, 7)])) == [E.none]
    await env.coord.close()
    env2 = await make_env(logs=env.logs)
    _, found = await env2.coord.fetch_offsets("g", [("t", [0])])
    assert found[0][1][0].offset == 42
    _, found = await env2.coord.fetch_offsets("s", None)
    assert found[0][0] == "u" and found[0][1][0].offset == 7
    d = await env2.coord.describe_group("g")
    assert d.state == "Stable" and {x.member_id for x in d.members} == {r.member_id for r in joins}
    assert {x.assignment for x in d.members} == {r.member_id.encode() for r in joins}
    # reloaded members keep their generation if they heartbeat ...
    assert await env2.coord.heartbeat("g", 1, m, None) == E.none
    # ... and expire if they do not
    await env2.advance(10_001)
    d = await env2.coord.describe_group("g")
    assert joins[1].member_id not in {x.member_id for x in d.members}


@async_test
async def test_delete_groups_and_offset_delete_errors() -> None:
    env = await make_env()
    _joins, _ = await _stable_group(env, n=1)
    await env.coord.commit_offsets(_commit("s", [("t", 0, 1), ("t", 1, 2)]))
    res = await env.coord.delete_groups(["g", "s", "missing"])
    assert res == {"g": E.non_empty_group, "s": E.none, "missing": E.group_id_not_found}
    assert (await env.coord.describe_group("s")).error == E.group_id_not_found
    assert any(k[:2] == b"\x00\x02" and v is None for k, v in env.log_for("s").records)
    # OffsetDelete: subscribed topic in an active consumer group is refused
    sub = (
        b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    )  # v0 subscription to t
    env2 = await make_env(config(initial_rebalance_delay_ms=0))
    r = await env2.coord.join_group(join_params(protocols=[("range", sub)]))
    await env2.coord.sync_group(SyncParams("g", 1, r.member_id, None, None, None, {}))
    await env2.coord.commit_offsets(_commit("g", [("t", 0, 1), ("u", 0, 1)], 1, r.member_id))
    err, errors = await env2.coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert (err, errors) == (E.none, [E.group_subscribed_to_topic, E.none])
    _, found = await env2.coord.fetch_offsets("g", None)
    assert [t for t, _ in found] == ["t"]
    assert (await env2.coord.delete_offsets("missing", [("t", 0)]))[0] == E.group_id_not_found


@async_test
async def test_list_groups_and_unloaded_partition() -> None:
    env = await make_env()
    await _stable_group(env, n=1)
    await env.coord.commit_offsets(_commit("s", [("t", 0, 1)]))
    err, groups = await env.coord.list_groups()
    assert err == E.none and {(g.group_id, g.state) for g in groups} == {
        ("g", "Stable"),
        ("s", "Empty"),
    }
    await env.coord.unload(env.coord.partition_for("s"))
    assert await env.coord.commit_offsets(_commit("s", [("t", 0, 1)])) == [E.not_coordinator]

import datetime
import importlib
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.context import RequestContext
from broker.api.group import GroupApi
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY
from tests.broker.group_support import async_test, config, make_env

E = ErrorCode


def _req(api: str, version: int, **kw: Any) -> Any:
    mod = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    names = [n for n in dir(mod) if n.endswith("Request") and not n.startswith("_")]
    return getattr(mod, names[0])(**kw)


def _nested(api: str, version: int, cls: str, **kw: Any) -> Any:
    return getattr(importlib.import_module(f"kio.schema.{api}.v{version}.request"), cls)(**kw)


def _ctx(api_key: int, version: int) -> RequestContext:
    header = RequestHeader(api_key, version, 1, "cli", 1)
    return RequestContext(
        header=header, connection_id="c1", listener="PLAIN", peer_host="127.0.0.1"
    )


def _check(api_key: int, req: Any, resp: Any) -> None:
    version = int(type(req).__version__)
    assert type(resp) is REGISTRY.spec(api_key).response_type(version)
    REGISTRY.encode_response(api_key, version, 1, resp)  # encodable at that version


async def _api() -> tuple[GroupApi, Any]:
    env = await make_env(config(initial_rebalance_delay_ms=0))
    return GroupApi(env.coord, lambda t: t != "missing"), env


def _join(version: int, member_id: str = "") -> Any:
    kw: dict[str, Any] = {
        "group_id": "g",
        "session_timeout": datetime.timedelta(seconds=10),
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": (
            _nested("join_group", version, "JoinGroupRequestProtocol", name="range", metadata=b"m"),
        ),
    }
    if version >= 1:
        kw["rebalance_timeout"] = datetime.timedelta(seconds=30)
    return _req("join_group", version, **kw)


@pytest.mark.parametrize("version", [0, 3, 5])
def test_join_sync_heartbeat_old_versions(version: int) -> None:
    @async_test
    async def run() -> None:
        api, _ = await _api()
        req = _join(version)
        resp = await api.handle_join_group(_ctx(11, version), req)
        if version >= 4:
            assert resp.error_code == E.member_id_required
            req = _join(version, resp.member_id)
            resp = await api.handle_join_group(_ctx(11, version), req)
        _check(11, req, resp)
        assert resp.error_code == E.none and resp.generation_id == 1
        assert resp.member_id.startswith("cli-") and resp.leader == resp.member_id
        assert [m.member_id for m in resp.members] == [resp.member_id]
        sv = min(version, 3)
        sreq = _req(
            "sync_group",
            sv,
            group_id="g",
            generation_id=1,
            member_id=resp.member_id,
            assignments=(
                _nested(
                    "sync_group",
                    sv,
                    "SyncGroupRequestAssignment",
                    member_id=resp.member_id,
                    assignment=b"A",
                ),
            ),
        )
        sresp = await api.handle_sync_group(_ctx(14, sv), sreq)
        _check(14, sreq, sresp)
        assert sresp.error_code == E.none and sresp.assignment == b"A"
        hreq = _req("heartbeat", 0, group_id="g", generation_id=1, member_id=resp.member_id)
        hresp = await api.handle_heartbeat(_ctx(12, 0), hreq)
        _check(12, hreq, hresp)
        assert hresp.error_code == E.none

    run()


@async_test
async def test_join_v9_member_id_required_then_sync_v5_and_leave_v5() -> None:
    api, _ = await _api()
    first = await api.handle_join_group(_ctx(11, 9), _join(9))
    assert first.error_code == E.member_id_required and first.member_id.startswith("cli-")
    req = _join(9, first.member_id)
    resp = await api.handle_join_group(_ctx(11, 9), req)
    _check(11, req, resp)
    assert (
        resp.error_code == E.none
        and resp.protocol_type == "consumer"
        and resp.protocol_name == "range"
    )
    sreq = _req(
        "sync_group",
        5,
        group_id="g",
        generation_id=1,
        member_id=resp.member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(),
    )
    sresp = await api.handle_sync_group(_ctx(14, 5), sreq)
    _check(14, sreq, sresp)
    assert (sresp.error_code, sresp.protocol_name, sresp.assignment) == (E.none, "range", b"")
    mi = _nested("leave_group", 5, "MemberIdentity", member_id=resp.member_id)
    ghost = _nested("leave_group", 5, "MemberIdentity", member_id="ghost")
    lreq = _req("leave_group", 5, group_id="g", members=(mi, ghost))
    lresp = await api.handle_leave_group(_ctx(13, 5), lreq)
    _check(13, lreq, lresp)
    assert [m.error_code for m in lresp.members] == [E.none, E.unknown_member_id]
    l0 = _req("leave_group", 0, group_id="g", member_id="ghost")
    l0resp = await api.handle_leave_group(_ctx(13, 0), l0)
    _check(13, l0, l0resp)
    assert l0resp.error_code == E.unknown_member_id


def _commit_req(version: int, topic: str = "t") -> Any:
    part = _nested(
        "offset_commit",
        version,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=42,
        committed_metadata="md",
    )
    t = _nested(
        "offset_commit", version, "OffsetCommitRequestTopic", name=topic, partitions=(part,)
    )
    kw: dict[str, Any] = {"group_id": "s", "topics": (t,), "member_id": ""}
    if version <= 4:
        kw["retention_time"] = datetime.timedelta(milliseconds=-1)
    return _req("offset_commit", version, **kw)


@pytest.mark.parametrize(("commit_v", "fetch_v"), [(2, 1), (5, 5), (8, 7), (9, 9)])
def test_offset_commit_then_fetch(commit_v: int, fetch_v: int) -> None:
    @async_test
    async def run() -> None:
        api, _ = await _api()
        creq = _commit_req(commit_v)
        cresp = await api.handle_offset_commit(_ctx(8, commit_v), creq)
        _check(8, creq, cresp)
        assert cresp.topics[0].partitions[0].error_code == E.none
        missing = _commit_req(commit_v, "missing")
        mresp = await api.handle_offset_commit(_ctx(8, commit_v), missing)
        assert mresp.topics[0].partitions[0].error_code == E.unknown_topic_or_partition
        if fetch_v >= 8:
            topic = _nested(
                "offset_fetch",
                fetch_v,
                "OffsetFetchRequestTopics",
                name="t",
                partition_indexes=(0, 1),
            )
            group = _nested(
                "offset_fetch", fetch_v, "OffsetFetchRequestGroup", group_id="s", topics=(topic,)
            )
            freq = _req("offset_fetch", fetch_v, groups=(group,), require_stable=True)
            fresp = await api.handle_offset_fetch(_ctx(9, fetch_v), freq)
            parts = fresp.groups[0].topics[0].partitions
        else:
            topic = _nested(
                "offset_fetch",
                fetch_v,
                "OffsetFetchRequestTopic",
                name="t",
                partition_indexes=(0, 1),
            )
            freq = _req("offset_fetch", fetch_v, group_id="s", topics=(topic,))
            fresp = await api.handle_offset_fetch(_ctx(9, fetch_v), freq)
            parts = fresp.topics[0].partitions
        _check(9, freq, fresp)
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in parts] == [
            (0, 42, "md"),
            (1, -1, ""),
        ]

    run()


@pytest.mark.parametrize("version", [0, 5, 6])
def test_describe_list_delete(version: int) -> None:
    @async_test
    async def run() -> None:
        api, _ = await _api()
        await api.handle_offset_commit(_ctx(8, 8), _commit_req(8))
        dreq = _req(
            "describe_groups",
            version,
            groups=("s", "nope"),
            **({"include_authorized_operations": False} if version >= 3 else {}),
        )
        dresp = await api.handle_describe_groups(_ctx(15, version), dreq)
        _check(15, dreq, dresp)
        assert [(g.group_id, g.group_state) for g in dresp.groups] == [
            ("s", "Empty"),
            ("nope", "Dead"),
        ]
        assert dresp.groups[1].error_code == (E.group_id_not_found if version >= 6 else E.none)
        lv = min(version, 5)
        lreq = _req("list_groups", lv, **({"states_filter": ("empty",)} if lv >= 4 else {}))
        lresp = await api.handle_list_groups(_ctx(16, lv), lreq)
        _check(16, lreq, lresp)
        assert [g.group_id for g in lresp.groups] == ["s"]
        xv = min(version, 2)
        xreq = _req("delete_groups", xv, groups_names=("s", "nope"))
        xresp = await api.handle_delete_groups(_ctx(42, xv), xreq)
        _check(42, xreq, xresp)
        assert [(r.group_id, r.error_code) for r in xresp.results] == [
            ("s", E.none),
            ("nope", E.group_id_not_found),
        ]

    run()


@async_test
async def test_list_groups_v5_types_filter_and_offset_delete() -> None:
    api, _ = await _api()
    await api.handle_offset_commit(_ctx(8, 8), _commit_req(8))
    only_consumer = await api.handle_list_groups(
        _ctx(16, 5), _req("list_groups", 5, types_filter=("consumer",))
    )
    assert only_consumer.groups == ()
    classic = await api.handle_list_groups(
        _ctx(16, 5), _req("list_groups", 5, types_filter=("Classic",))
    )
    assert [g.group_type for g in classic.groups] == ["classic"]
    part = _nested("offset_delete", 0, "OffsetDeleteRequestPartition", partition_index=0)
    topics = tuple(
        _nested("offset_delete", 0, "OffsetDeleteRequestTopic", name=n, partitions=(part,))
        for n in ("t", "missing")
    )
    req = _req("offset_delete", 0, group_id="s", topics=topics)
    resp = await api.handle_offset_delete(_ctx(47, 0), req)
    _check(47, req, resp)
    assert resp.error_code == E.none
    assert [t.partitions[0].error_code for t in resp.topics] == [
        E.none,
        E.unknown_topic_or_partition,
    ]
    gone = await api.handle_offset_delete(
        _ctx(47, 0), _req("offset_delete", 0, group_id="zz", topics=topics)
    )
    assert gone.error_code == E.group_id_not_found

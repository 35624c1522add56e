"""ConsumerGroupHeartbeat and ConsumerGroupDescribe handlers at each served version: requests
in, encodable responses out, v0's coordinator-made member id, errors as Kafka answers them."""

import asyncio
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.consumer_group import ConsumerGroupApi
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from broker.security.acls import Acl, AclOperation, PatternType, PermissionType, ResourceType
from broker.security.authorizer import Authorizer
from protocol.registry import REGISTRY
from tests.broker.group_support import PARTITIONS, async_test, config
from tests.broker.test_group_api import _check, _ctx

E = ErrorCode
T1 = uuid.UUID(int=77)


async def _api() -> ConsumerGroupApi:
    coord = GroupCoordinator(config(), ManualScheduler(), lambda: {"t1": (T1, 3)})
    for p in range(PARTITIONS):
        await coord.load(p, InMemoryRecordLog())
    return ConsumerGroupApi(coord)


def _hb(version: int, member_id: str, epoch: int, **kw: Any) -> Any:
    cls = REGISTRY.spec(68).request_type(version)
    base: dict[str, Any] = {"group_id": "g", "member_id": member_id, "member_epoch": epoch}
    if epoch == 0:
        base |= {
            "rebalance_timeout": datetime.timedelta(seconds=30),
            "subscribed_topic_names": ("t1",),
            "topic_partitions": (),
        }
    else:
        base["topic_partitions"] = None
    return cls(**(base | kw))


def _describe(version: int, *groups: str) -> Any:
    cls = REGISTRY.spec(69).request_type(version)
    return cls(group_ids=groups, include_authorized_operations=False)


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_join_and_describe(version: int) -> None:
    asyncio.run(asyncio.wait_for(_join_and_describe(version), 10))


async def _join_and_describe(version: int) -> None:
    api = await _api()
    req = _hb(version, "" if version == 0 else "m1", 0)
    resp = await api.handle_heartbeat(_ctx(68, version), req)
    _check(68, req, resp)
    assert resp.error_code == E.none and resp.member_epoch == 1 and resp.member_id
    assert resp.heartbeat_interval == datetime.timedelta(seconds=5)
    (tp,) = resp.assignment.topic_partitions
    assert (tp.topic_id, tp.partitions) == (T1, (0, 1, 2))
    again = _hb(version, resp.member_id, 1)
    resp2 = await api.handle_heartbeat(_ctx(68, version), again)
    _check(68, again, resp2)
    assert (resp2.error_code, resp2.member_epoch, resp2.assignment) == (E.none, 1, None)
    req = _describe(version, "g", "nope")
    d = await api.handle_describe(_ctx(69, version), req)
    _check(69, req, d)
    g, missing = d.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (
        E.none,
        "Stable",
        1,
        "uniform",
    )
    (m,) = g.members
    assert m.member_id == resp.member_id and m.subscribed_topic_names == ("t1",)
    assert [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [
        ("t1", (0, 1, 2))
    ]
    assert missing.error_code == E.group_id_not_found


@async_test
async def test_heartbeat_errors() -> None:
    api = await _api()
    no_id = _hb(1, "", 0)
    assert (await api.handle_heartbeat(_ctx(68, 1), no_id)).error_code == E.invalid_request
    bad_rx = _hb(1, "m", 0, subscribed_topic_names=None, subscribed_topic_regex="(?=x)")
    resp = await api.handle_heartbeat(_ctx(68, 1), bad_rx)
    assert resp.error_code == E.invalid_regular_expression and resp.error_message
    unknown = _hb(1, "m", 3)
    assert (await api.handle_heartbeat(_ctx(68, 1), unknown)).error_code == (E.group_id_not_found)


@async_test
async def test_acls_read_for_heartbeat_describe_for_describe() -> None:
    me = "User:ANONYMOUS"
    acls = {
        1: Acl(
            ResourceType.GROUP,
            "g",
            PatternType.LITERAL,
            me,
            "*",
            AclOperation.DESCRIBE,
            PermissionType.ALLOW,
        ),
    }
    api = await _api()
    api.authorizer = Authorizer(lambda: acls)
    resp = await api.handle_heartbeat(_ctx(68, 1), _hb(1, "m", 0))
    assert resp.error_code == E.group_authorization_failed  # DESCRIBE does not imply READ
    d = await api.handle_describe(_ctx(69, 1), _describe(1, "g", "other"))
    assert [g.error_code for g in d.groups] == [E.group_id_not_found, E.group_authorization_failed]


@async_test
async def test_describe_v1_tells_classic_members_apart() -> None:
    from tests.broker.test_mixed_groups import _join

    api = await _api()
    await api.handle_heartbeat(_ctx(68, 1), _hb(1, "m1", 0))
    joined = await api.coordinator.join_group(_join())  # a classic member in the consumer group
    assert joined.error == E.none
    req = _describe(1, "g")
    d = await api.handle_describe(_ctx(69, 1), req)
    _check(69, req, d)
    types = {m.member_id: m.member_type for m in d.groups[0].members}
    assert types == {"m1": 1, joined.member_id: 0}

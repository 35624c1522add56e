"""Per-group dynamic configs (resource type GROUP, 32): names and checks, the controller storing
them as ConfigRecords, DescribeConfigs rows, and the group coordinator and share-partition
leader applying them in place of the broker's values."""

import asyncio
import re
import uuid
from collections.abc import Mapping

import pytest
from kio.schema.errors import ErrorCode

from broker.config import group_configs as gc
from broker.config.group_configs import GroupConfigDefaults, GroupConfigError
from broker.controller.controller import DELETE, SET, ConfigChange, Controller, Validators
from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.consumer_shard import HeartbeatParams
from broker.coordinator.group.share_groups import ShareHeartbeatParams
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.share.leader_states import LeaderShareStates
from broker.coordinator.share.partition import ShareConfig
from broker.coordinator.timer import ManualScheduler
from tests.broker.group_support import PARTITIONS, Env, async_test, config
from tests.broker.test_controller_image import MemoryQuorum

E = ErrorCode
KAFKA = GroupConfigDefaults.kafka()


def test_names_and_values() -> None:
    assert set(gc.NAMES) == {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
    }
    assert gc.check_value(gc.SHARE_RESET, " Earliest") == "earliest"
    assert gc.check_value(gc.CONSUMER_SESSION, "50000") == "50000"
    with pytest.raises(
        GroupConfigError, match=re.escape("Unknown group config name: session.timeout.ms")
    ):
        gc.check_value("session.timeout.ms", "1")
    with pytest.raises(GroupConfigError, match="Not a number"):
        gc.check_value(gc.SHARE_SESSION, "soon")
    with pytest.raises(GroupConfigError, match="at least 1000"):
        gc.check_value(gc.SHARE_LOCK, "999")
    with pytest.raises(GroupConfigError, match="read_committed, read_uncommitted"):
        gc.check_value(gc.SHARE_ISOLATION, "serializable")


def test_bounds_come_from_the_broker() -> None:
    gc.check_group({}, KAFKA)
    with pytest.raises(GroupConfigError, match=re.escape("group.consumer.min.session.timeout.ms")):
        gc.check_group({gc.CONSUMER_SESSION: "44999"}, KAFKA)
    with pytest.raises(
        GroupConfigError, match=re.escape("group.share.max.record.lock.duration.ms")
    ):
        gc.check_group({gc.SHARE_LOCK: "60001"}, KAFKA)
    with pytest.raises(GroupConfigError, match=re.escape("must be greater than share.heartbeat")):
        wide = GroupConfigDefaults.from_static({"group.share.max.heartbeat.interval.ms": "90000"})
        gc.check_group({gc.SHARE_HEARTBEAT: "50000"}, wide)
    low = GroupConfigDefaults.from_static(
        {"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "7"}
    )
    gc.check_group({gc.CONSUMER_SESSION: "6000"}, low)
    assert gc.effective({}, low)[gc.CONSUMER_SESSION] == "7"  # the broker's value


def test_describe_rows() -> None:
    rows = {r["name"]: r for r in gc.describe_rows({gc.SHARE_RESET: "earliest"}, KAFKA)}
    assert set(rows) == set(gc.NAMES)
    assert (rows[gc.SHARE_RESET]["value"], rows[gc.SHARE_RESET]["source"]) == ("earliest", 8)
    assert (rows[gc.SHARE_LOCK]["value"], rows[gc.SHARE_LOCK]["source"]) == ("30000", 5)
    assert rows[gc.SHARE_LOCK]["type"] == 3 and rows[gc.SHARE_RESET]["type"] == 2


def _controller(q: MemoryQuorum) -> Controller:
    v = Validators(lambda k, v: v, lambda k, v: v, group_defaults=KAFKA)
    return Controller(q, lambda: q.image, v, node_id=1)


def test_controller_stores_group_configs_as_config_records() -> None:
    q = MemoryQuorum()
    c = _controller(q)

    def alter(*ops: tuple[str, int, str | None], name: str = "g") -> tuple[ErrorCode, str]:
        (r,) = asyncio.run(
            c.alter_configs([ConfigChange(gc.GROUP_RESOURCE, name, list(ops))], False)
        )
        return r.error, r.message or ""

    assert alter((gc.CONSUMER_SESSION, SET, "50000"), (gc.SHARE_RESET, SET, "EARLIEST")) == (
        E.none,
        "",
    )
    assert q.image.config(gc.GROUP_RESOURCE, "g") == {
        gc.CONSUMER_SESSION: "50000",
        gc.SHARE_RESET: "earliest",
    }
    # unknown name, out of range, the pair rule over what is stored: refused, nothing written
    error, message = alter(("foo.bar", SET, "1"))
    assert error == E.invalid_config and message == "Unknown group config name: foo.bar"
    error, message = alter((gc.CONSUMER_SESSION, SET, "70000"))
    assert error == E.invalid_config and "group.consumer.max.session.timeout.ms" in message
    error, message = alter(
        (gc.CONSUMER_HEARTBEAT, SET, "15000"), (gc.CONSUMER_SESSION, SET, "45000")
    )
    assert error == E.none  # 45000 > 15000
    error, message = alter(
        (gc.CONSUMER_SESSION, DELETE, None), (gc.CONSUMER_HEARTBEAT, SET, "5000")
    )
    assert error == E.none
    assert q.image.config(gc.GROUP_RESOURCE, "g") == {
        gc.CONSUMER_HEARTBEAT: "5000",
        gc.SHARE_RESET: "earliest",
    }
    assert alter((gc.SHARE_RESET, SET, "x"), name="")[0] == E.invalid_request


@async_test
async def test_coordinator_uses_the_group_session_and_heartbeat() -> None:
    overrides: dict[str, Mapping[str, str]] = {
        "fast": {gc.SHARE_HEARTBEAT: "1234", gc.SHARE_SESSION: "2000"},
        "cfast": {gc.CONSUMER_HEARTBEAT: "777", gc.CONSUMER_SESSION: "3000"},
    }
    sched = ManualScheduler()
    t1 = uuid.UUID(int=1)
    cfg = config(
        share_session_timeout_ms=10_000,
        consumer_session_timeout_ms=10_000,
        group_overrides=lambda g: overrides.get(g, {}),
    )
    coord = GroupCoordinator(cfg, sched, lambda: {"a": (t1, 1)})
    env = Env(coord, sched)
    for p in range(PARTITIONS):
        env.logs[p] = InMemoryRecordLog()
        await coord.load(p, env.logs[p])
    fast = await coord.share_group_heartbeat(
        ShareHeartbeatParams("fast", "m", 0, topic_names=("a",))
    )
    slow = await coord.share_group_heartbeat(
        ShareHeartbeatParams("slow", "m", 0, topic_names=("a",))
    )
    assert (fast.heartbeat_interval_ms, slow.heartbeat_interval_ms) == (1234, 5000)
    hb = await coord.consumer_group_heartbeat(
        HeartbeatParams("cfast", "x", 0, rebalance_timeout_ms=5000, topic_names=("a",), owned={})
    )
    assert hb.heartbeat_interval_ms == 777
    await env.advance(3_001)  # past both groups' own session timeouts, not the broker's
    assert (await coord.share_group_describe("fast")).members == []
    assert len((await coord.share_group_describe("slow")).members) == 1
    assert (await coord.consumer_group_describe("cfast")).members == []


class _Log:
    log_start_offset, high_watermark = 3, 10


class _Hosted:
    leader_epoch = 0
    log = _Log()


@async_test
async def test_leader_uses_the_group_reset_and_lock_duration() -> None:
    overrides = {"early": {gc.SHARE_RESET: "earliest", gc.SHARE_LOCK: "20000"}}
    states = LeaderShareStates(
        ShareConfig(lock_duration_ms=30_000), "latest", None, lambda g: overrides.get(g, {})
    )
    t = uuid.UUID(int=1)
    for group in ("early", "late"):
        await states.load((group, t, 0), _Hosted())
    early = states.current(("early", t, 0), _Hosted())
    late = states.current(("late", t, 0), _Hosted())
    assert early is not None and late is not None
    assert (early.start_offset, late.start_offset) == (3, 10)
    assert (early.config.lock_duration_ms, late.config.lock_duration_ms) == (20_000, 30_000)
    # a change applies to the loaded share-partition on its next use
    overrides["late"] = {gc.SHARE_LOCK: "45000"}
    late = states.current(("late", t, 0), _Hosted())
    assert late is not None and late.config.lock_duration_ms == 45_000

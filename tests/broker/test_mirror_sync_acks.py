"""Synchronous mirroring on the source: the sans-IO in-sync mirror set and degraded episodes
(`broker.mirror.core.sync_acks_state`), and the waits of `broker.mirror.sync_acks.SyncAcks`
on a fake millisecond clock."""

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.config.server_config import ConfigError
from broker.config.topic_validation import validate_topic_config
from broker.mirror.core.sync_acks_state import Event, PartitionSync, SyncPolicy, policy_of
from broker.mirror.sync_acks import SyncAcks, SyncOutcome


def test_policy_of_topic_configs() -> None:
    assert policy_of({}) is None
    assert policy_of({"mirror.sync.enable": "false"}) is None
    assert policy_of({"mirror.sync.enable": "true"}) == SyncPolicy(30000, False)
    assert policy_of(
        {
            "mirror.sync.enable": "true",
            "mirror.sync.timeout.ms": "1500",
            "mirror.sync.on.timeout": "async",
        }
    ) == SyncPolicy(1500, True)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("mirror.sync.enable", "yes", "mirror.sync.enable"),
        ("mirror.sync.timeout.ms", "0", "mirror.sync.timeout.ms"),
        ("mirror.sync.timeout.ms", "soon", "mirror.sync.timeout.ms"),
        ("mirror.sync.on.timeout", "drop", "String must be one of: refuse, async"),
        ("mirror.sync.enabled", "true", "did you mean 'mirror.sync.enable'"),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        validate_topic_config(key, value)


def test_a_mirror_joins_once_it_holds_what_the_members_held() -> None:
    st = PartitionSync(synced_end=100)
    assert st.report("b/dr", 90, 0) == []  # still copying the backlog: not waited for
    assert not st.covered(1) and st.committed_end() is None
    assert st.report("b/dr", 100, 10) == [Event.JOINED]
    assert st.covered(100) and not st.covered(101)
    # a second mirror behind the first does not hold produces back
    assert st.report("c/dr", 50, 20) == []
    st.report("b/dr", 130, 30)
    assert st.covered(130) and st.synced_end == 130
    assert st.report("c/dr", 130, 40) == [Event.JOINED]
    st.report("b/dr", 150, 50)
    assert not st.covered(150)  # now both are waited for
    # silence beyond the timeout: c leaves the set, b alone counts
    assert st.expire(1045, 1000) == ["c/dr"]
    assert st.covered(150)
    assert st.expire(5000, 1000) == ["b/dr"]
    assert st.committed_end() is None and not st.covered(1)


def test_degraded_episode_ends_once_the_mirror_holds_what_was_acknowledged() -> None:
    st = PartitionSync(synced_end=0)
    st.report("b/dr", 10, 0)
    assert st.degrade(20, 100) is Event.DEGRADED
    assert st.degrade(21, 150) is Event.NONE  # the same episode
    st.acked_async(40)
    assert st.report("b/dr", 15, 200) == []  # below the target (21): the target moves to 40
    assert st.catch_up_target == 40
    st.acked_async(60)
    assert st.report("b/dr", 40, 300) == [Event.RECOVERED]  # reached the previous target
    assert not st.degraded and st.degraded_seconds(1000) == pytest.approx(0.2)


class _Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


async def _step(clock: _Clock, ms: int) -> None:
    clock.ms += ms
    await asyncio.sleep(ms / 1000)


async def _wait_past(clock: _Clock, ms: int, wait: Coroutine[Any, Any, SyncOutcome]) -> SyncOutcome:
    """``wait``'s outcome, the clock moved ``ms`` on once it is waiting."""
    task = asyncio.create_task(wait)
    await asyncio.sleep(0)
    clock.ms += ms
    return await asyncio.wait_for(task, 2)


def test_wait_returns_when_the_mirror_reports_the_commit() -> None:
    async def run() -> None:
        clock = _Clock()
        sync = SyncAcks(clock)
        policy = SyncPolicy(2000, False)
        sync.report("t", 0, "b/dr", 10, 10, policy)
        task = asyncio.create_task(
            sync.wait("t", 0, 12, 10, policy, clock.ms, clock.ms + 30000, lambda: True)
        )
        await _step(clock, 5)
        assert not task.done()
        sync.report("t", 0, "b/dr", 11, 12, policy)
        await _step(clock, 5)
        assert not task.done()
        sync.report("t", 0, "b/dr", 12, 12, policy)
        outcome = await asyncio.wait_for(task, 1)
        assert outcome.error == ErrorCode.none
        snap = sync.metrics_snapshot()
        assert sum(snap.wait_buckets) == 1 and snap.partitions[0].in_sync_mirrors == 1

    asyncio.run(run())


def test_refuse_after_the_timeout_names_the_partition() -> None:
    async def run() -> None:
        clock = _Clock()
        sync = SyncAcks(clock)
        policy = SyncPolicy(50, False)
        sync.report("t", 1, "b/dr", 5, 5, policy)
        start = clock.ms
        outcome = await _wait_past(
            clock, 60, sync.wait("t", 1, 9, 5, policy, start, start + 30000, lambda: True)
        )
        assert outcome.error == ErrorCode.not_enough_replicas_after_append
        assert outcome.message is not None
        assert "t-1" in outcome.message and "mirror.sync.timeout.ms=50" in outcome.message

    asyncio.run(run())


def test_request_deadline_before_the_sync_timeout_is_request_timed_out() -> None:
    async def run() -> None:
        clock = _Clock()
        sync = SyncAcks(clock)
        policy = SyncPolicy(60000, False)
        outcome = await _wait_past(
            clock, 40, sync.wait("t", 0, 9, 0, policy, clock.ms, clock.ms + 30, lambda: True)
        )
        assert outcome.error == ErrorCode.request_timed_out

    asyncio.run(run())


def test_async_degrades_with_one_warning_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        clock = _Clock()
        sync = SyncAcks(clock)
        policy = SyncPolicy(50, True)
        sync.report("t", 0, "b/dr", 5, 5, policy)
        outcome = await _wait_past(
            clock, 60, sync.wait("t", 0, 6, 5, policy, clock.ms, clock.ms + 9999, lambda: True)
        )
        assert outcome.error == ErrorCode.none
        assert sync.metrics_snapshot().partitions[0].degraded
        # degraded: answered at once, no second warning
        for required in (7, 8):
            outcome = await sync.wait(
                "t", 0, required, 5, policy, clock.ms, clock.ms + 9999, lambda: True
            )
            assert outcome.error == ErrorCode.none
        clock.ms += 100
        sync.report("t", 0, "b/dr", 8, 8, policy)  # back, holding all that was acknowledged
        clock.ms += 1000
        row = sync.metrics_snapshot().partitions[0]
        assert not row.degraded and row.degraded_seconds == pytest.approx(0.1)

    with caplog.at_level(logging.INFO, logger="broker.mirror.sync_acks"):
        asyncio.run(run())
    degraded = [r for r in caplog.records if "degraded to asynchronous" in r.getMessage()]
    assert len(degraded) == 1 and degraded[0].levelno == logging.WARNING
    assert any("back to synchronous" in r.getMessage() for r in caplog.records)


def test_leadership_lost_while_waiting() -> None:
    async def run() -> None:
        clock = _Clock()
        sync = SyncAcks(clock)
        policy = SyncPolicy(1000, False)
        leading = [True]
        task = asyncio.create_task(
            sync.wait("t", 0, 3, 0, policy, clock.ms, clock.ms + 9999, lambda: leading[0])
        )
        await asyncio.sleep(0)
        leading[0] = False
        sync.report("t", 0, "b/dr", 1, 1, policy)  # any report wakes the waiter
        assert (await asyncio.wait_for(task, 2)).error == ErrorCode.not_leader_or_follower

    asyncio.run(run())


def test_foreign_mirror_is_logged_once_naming_mirror_and_topic(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sync = SyncAcks()
    with caplog.at_level(logging.WARNING, logger="broker.mirror.sync_acks"):
        sync.note_foreign("rdkafka-consumer", "orders")  # a consumer: nothing
        sync.note_foreign("broker-3-fetcher-0-mirror-dr", "orders")
        sync.note_foreign("broker-3-fetcher-1-mirror-dr", "orders")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "mirror dr" in lines[0] and "orders" in lines[0]
    assert sync.metrics_snapshot().foreign_mirrors == 1


def test_sync_keys_are_never_copied_to_or_deleted_from_a_mirror_topic() -> None:
    """They describe a cluster's wait for its own mirrors (docs/mirroring.md)."""
    from broker.mirror.core.config_filter import config_ops

    source = {"mirror.sync.enable": "true", "mirror.sync.on.timeout": "async", "retention.ms": "9"}
    assert config_ops(source, {}, [], lambda k, v: v) == [("retention.ms", 0, "9")]
    local = {"mirror.sync.enable": "true", "mirror.sync.timeout.ms": "100"}
    assert config_ops({}, local, [], lambda k, v: v) == []


def test_a_mirror_that_keeps_fetching_stays_known_and_a_forgotten_partition_goes() -> None:
    """An incremental Fetch names only the partitions whose commit moved: any Fetch of the
    mirror keeps its other partitions in sync; the session forgetting one drops it."""
    clock = _Clock()
    sync = SyncAcks(clock)
    policy = SyncPolicy(100, False)
    sync.report("t", 0, "b/dr", 5, 5, policy)
    for _ in range(5):
        clock.ms += 60
        sync.seen("b/dr")
    assert sync.metrics_snapshot().partitions[0].in_sync_mirrors == 1
    clock.ms += 150  # silent now
    assert sync.metrics_snapshot().partitions[0].in_sync_mirrors == 0
    sync.report("t", 0, "b/dr", 5, 5, policy)
    sync.drop("t", 0, "b/dr")
    assert sync.metrics_snapshot().partitions[0].in_sync_mirrors == 0


def test_a_partition_led_elsewhere_leaves_the_metrics() -> None:
    """A former leader must not report a partition degraded (and alert) forever."""
    leading = {("t", 0): True}
    clock = _Clock()
    sync = SyncAcks(clock, active=lambda t, p: leading.get((t, p), False))
    st_policy = SyncPolicy(100, True)
    sync.report("t", 0, "b/dr", 5, 5, st_policy)
    assert [r.partition for r in sync.metrics_snapshot().partitions] == [0]
    leading[("t", 0)] = False
    assert sync.metrics_snapshot().partitions == ()

"""The active controller's timed duties on a fake clock: they act only while the quorum
confirms this node leads, and a stall of the controller's own loop is no broker's silence."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from broker.controller.active_duties import ActiveControllerDuties
from broker.controller.cluster_control import ClusterControl
from broker.log.clock import ManualClock
from broker.quorum.stall_watch import StallWatch

from .test_cluster_control import CLUSTER, TIMEOUT, FakeCore, _beat, _core, _running


def _duties(
    core: FakeCore,
    cc: ClusterControl,
    clock: ManualClock,
    confirmed: Callable[[], bool],
    watch: StallWatch,
    needs_append: Callable[[], bool] = lambda: False,
) -> ActiveControllerDuties:
    def spawn(coro: Coroutine[Any, Any, None]) -> None:
        coro.close()

    return ActiveControllerDuties(
        1,
        core,  # type: ignore[arg-type]  # lock and commit, for the NoOpRecord
        cc,
        lambda: True,
        {},
        spawn,
        clock.now_ms,
        0.001,
        leadership_confirmed=confirmed,
        stalled_ms=watch.stalled_now,
        confirm_needs_append=needs_append,
    )


async def _rounds(duties: ActiveControllerDuties, n: int = 5) -> None:
    task = asyncio.ensure_future(duties.run())
    for _ in range(n):
        await asyncio.sleep(0.005)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _fenced(core: FakeCore) -> list[int]:
    return sorted(b.broker_id for b in core.image.brokers.values() if b.fenced)


def test_a_stall_of_the_controllers_loop_fences_nobody() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    clock = ManualClock(0)
    watch = StallWatch(clock.now_ms, threshold_ms=1000, tick_ms=100)
    duties = _duties(core, cc, clock, lambda: True, watch)
    for t in range(100, 8001, 100):  # the loop runs; every broker heartbeats
        clock.set(t)
        watch.observe()
    for b in (1, 2, 3):
        _beat(cc, core, b, 8000)
    clock.set(20_000)  # the loop did not run for 12 s: the heartbeats wait in its sockets
    asyncio.run(_rounds(duties))
    assert _fenced(core) == []
    # a broker that stays silent once the loop runs again is fenced as ever
    for t in range(20_100, 29_001, 100):
        clock.set(t)
        watch.observe()
    for b in (1, 2):
        _beat(cc, core, b, 29_000)
    clock.set(29_000)
    asyncio.run(_rounds(duties))
    assert _fenced(core) == [3]


def test_without_the_stall_discount_the_same_silence_would_fence() -> None:
    # the control: the same timeline with no stall noticed fences all three
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    clock = ManualClock(0)
    watch = StallWatch(clock.now_ms, threshold_ms=100_000, tick_ms=100)
    duties = _duties(core, cc, clock, lambda: True, watch)
    for b in (1, 2, 3):
        _beat(cc, core, b, 8000)
    clock.set(20_000)
    asyncio.run(_rounds(duties))
    assert _fenced(core) == [1, 2, 3]


def test_nothing_is_fenced_until_the_quorum_confirms_the_leadership() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    clock = ManualClock(0)
    watch = StallWatch(clock.now_ms, threshold_ms=100_000, tick_ms=100)
    confirmed = [False]
    asked: list[int] = []

    def confirm() -> bool:
        asked.append(clock.now_ms())
        return confirmed[0]

    duties = _duties(core, cc, clock, confirm, watch)
    _beat(cc, core, 1, 10_000)
    clock.set(10_000)  # 2 and 3 silent since 0
    asyncio.run(_rounds(duties))
    assert asked and _fenced(core) == []
    confirmed[0] = True
    asyncio.run(_rounds(duties))
    assert _fenced(core) == [2, 3]


def test_leadership_lost_between_two_fencings_stops_the_second() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    answers = iter([True, False])  # confirmed for the first fencing, deposed before the next

    def confirm() -> bool:
        return next(answers, False)

    asyncio.run(cc.expire_sessions(10_000, confirm))  # 1, 2 and 3 silent since 0
    assert _fenced(core) == [1]
    asyncio.run(cc.expire_sessions(10_000, lambda: False))
    assert _fenced(core) == [1]
    asyncio.run(cc.expire_sessions(10_000))
    assert _fenced(core) == [1, 2, 3]


def test_after_a_stall_a_no_op_record_is_written_to_confirm_the_leadership() -> None:
    core = _core()
    cc = ClusterControl(core, CLUSTER, TIMEOUT)
    _running(core, cc, 1, 2, 3)
    clock = ManualClock(10_000)  # 2 and 3 silent since 0
    watch = StallWatch(clock.now_ms, threshold_ms=100_000, tick_ms=100)

    def needs_append() -> bool:  # the quorum's answer: until an entry is appended after the stall
        return _noops(core) == 0

    duties = _duties(core, cc, clock, lambda: False, watch, needs_append)
    asyncio.run(_rounds(duties))
    assert _noops(core) == 1 and _fenced(core) == []  # one, not one per round


def _noops(core: FakeCore) -> int:
    return sum(1 for b in core.batches for r in b if type(r).__name__ == "NoOpRecord")

"""The broker's lifecycle manager against a scripted controller and a clock that moves on demand."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.broker_lifecycle import BrokerLifecycleApi
from broker.api.context import RequestContext
from broker.controller.cluster_control import ClusterControl
from broker.quorum.broker_lifecycle import (
    BrokerLifecycleManager,
    BrokerState,
    LifecycleStopped,
)
from protocol.build import build
from protocol.headers import RequestHeader
from protocol.registry import REGISTRY
from tests.waits import wait_for_async

from .test_cluster_control import CLUSTER, MV, FakeCore, _core

REG, HB = 62, 63
INTERVAL = 2000


class FakeClock:
    def __init__(self) -> None:
        self.now = 0
        self.sleeps: list[int] = []
        self._sleepers: list[tuple[int, asyncio.Future[None]]] = []

    def now_ms(self) -> int:
        return self.now

    async def sleep_ms(self, ms: int) -> None:
        self.sleeps.append(ms)
        fut = asyncio.get_running_loop().create_future()
        entry = (self.now + ms, fut)
        self._sleepers.append(entry)
        try:
            await fut
        finally:
            self._sleepers.remove(entry)

    def advance(self, ms: int) -> None:
        self.now += ms
        for deadline, fut in list(self._sleepers):
            if deadline <= self.now and not fut.done():
                fut.set_result(None)


class ScriptedController:
    """Answers as a controller would; ``fail`` makes the next answers an exception or an error."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, Any]] = []
        self.epoch = 10
        self.caught_up_at = 0  # metadata offset the broker must report to be caught up
        self.unfence = True
        self.grant_shutdown = True
        self.fail: list[BaseException | ErrorCode] = []

    async def send(self, key: int, body: Any) -> Any:
        # what goes on the wire must encode at the version it was built for
        REGISTRY.encode_request(int(type(body).__version__), 1, "b", body)
        self.requests.append((key, body))
        await asyncio.sleep(0)
        if self.fail:
            f = self.fail.pop(0)
            if isinstance(f, BaseException):
                raise f
            return _resp(key, {"error_code": f})
        if key == REG:
            return _resp(REG, {"error_code": ErrorCode.none, "broker_epoch": self.epoch})
        caught_up = body.current_metadata_offset >= self.caught_up_at
        fenced = not (caught_up and self.unfence and not body.want_fence)
        shut = body.want_shut_down and self.grant_shutdown
        if body.broker_epoch != self.epoch:
            return _resp(HB, {"error_code": ErrorCode.stale_broker_epoch})
        return _resp(
            HB,
            {
                "error_code": ErrorCode.none,
                "is_caught_up": caught_up,
                "is_fenced": fenced or shut,
                "should_shut_down": shut,
            },
        )

    def kinds(self) -> list[int]:
        return [k for k, _ in self.requests]


def _resp(key: int, data: dict[str, Any]) -> Any:
    version = 4 if key == REG else 1
    base = {"throttle_time": 0, "broker_epoch": -1, "is_fenced": True}
    return build(REGISTRY.spec(key).response_type(version), {**base, **data})


def _manager(
    send: Callable[[int, Any], Awaitable[Any]],
    clock: FakeClock,
    offset: Callable[[], int] = lambda: 5,
    **kw: Any,
) -> BrokerLifecycleManager:
    return BrokerLifecycleManager(
        1,
        CLUSTER,
        uuid.UUID(int=1),
        [("PLAINTEXT", "localhost", 9092, 0)],
        "r1",
        MV,
        send,
        offset,
        clock=clock,
        interval_ms=INTERVAL,
        **kw,
    )


async def _until(cond: Callable[[], bool], what: str) -> None:
    await wait_for_async(cond, 5, what)


def test_registers_catches_up_and_runs() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.caught_up_at = 7
        applied = [5]
        m = _manager(ctl.send, clock, lambda: applied[0])
        m.start()
        await m.wait_registered()
        assert m.broker_epoch == 10
        key, reg = ctl.requests[0]
        assert key == REG and type(reg).__version__ == 4
        assert (reg.broker_id, reg.cluster_id, reg.incarnation_id, reg.rack) == (
            1,
            CLUSTER,
            uuid.UUID(int=1),
            "r1",
        )
        assert [
            (f.name, f.min_supported_version, f.max_supported_version) for f in reg.features
        ] == [("metadata.version", 7, 26)]
        await _until(lambda: len(ctl.requests) == 2, "the first heartbeat, sent at once")
        hb = ctl.requests[1][1]
        assert type(hb).__version__ == 1
        assert (hb.broker_epoch, hb.current_metadata_offset, hb.want_fence, hb.want_shut_down) == (
            10,
            5,
            False,
            False,
        )
        await _until(lambda: clock.sleeps == [10], "a quick heartbeat while catching up")
        assert m.state is BrokerState.STARTING
        applied[0] = 7
        clock.advance(10)
        await m.wait_unfenced()
        assert m.state is BrokerState.RUNNING and not m.is_fenced
        await _until(lambda: clock.sleeps == [10, INTERVAL], "the regular interval")
        clock.advance(INTERVAL - 1)
        await asyncio.sleep(0.01)
        assert len(ctl.requests) == 3
        clock.advance(1)
        await _until(lambda: len(ctl.requests) == 4, "a heartbeat every interval")
        await m.close()

    asyncio.run(main())


def test_recovery_while_fenced_by_choice() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        m = _manager(ctl.send, clock, ready_to_unfence=False)
        m.start()
        await m.wait_caught_up()
        assert m.state is BrokerState.RECOVERY
        assert ctl.requests[-1][1].want_fence
        await _until(lambda: clock.sleeps == [INTERVAL], "waiting an interval")
        m.set_ready_to_unfence()  # heartbeat at once, not after the interval
        await m.wait_unfenced()
        assert not ctl.requests[-1][1].want_fence and clock.now == 0
        await m.close()

    asyncio.run(main())


def test_unreachable_controller_backs_off_exponentially() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.fail = [ConnectionError("refused"), TimeoutError(), ConnectionError("reset")]
        m = _manager(ctl.send, clock)
        m.start()
        for n, delay in enumerate((100, 200, 400), 1):
            await _until(lambda n=n: len(clock.sleeps) == n, f"backoff {n}")  # type: ignore[misc]
            assert clock.sleeps[-1] == delay
            clock.advance(delay)
        await m.wait_registered()
        assert ctl.kinds()[:4] == [REG] * 4
        await m.close()

    asyncio.run(main())


def test_backoff_stops_at_the_session_timeout() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.fail = [ErrorCode.unknown_server_error] * 9
        m = _manager(ctl.send, clock, session_timeout_ms=3000)
        m.start()
        for n in range(1, 10):
            await _until(lambda n=n: len(clock.sleeps) == n, f"backoff {n}")  # type: ignore[misc]
            clock.advance(clock.sleeps[-1])
        await m.wait_registered()
        assert clock.sleeps == [100, 200, 400, 800, 1600, 3000, 3000, 3000, 3000]
        await m.close()

    asyncio.run(main())


def test_failed_heartbeats_back_off_up_to_the_interval_only() -> None:
    """Issue 31: a registered broker whose heartbeats fail (each timed-out attempt already took
    seconds) tries again at least every heartbeat interval, so one that heals is heard before
    its session ends; registrations still back off up to the session timeout (above)."""

    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        m = _manager(ctl.send, clock, session_timeout_ms=9000)
        m.start()
        await m.wait_unfenced()
        n0 = len(clock.sleeps)
        ctl.fail = [TimeoutError()] * 6
        clock.advance(INTERVAL)  # the next heartbeat, and its failures
        for n in range(1, 7):
            await _until(lambda n=n: len(clock.sleeps) == n0 + n, f"backoff {n}")  # type: ignore[misc]
            clock.advance(clock.sleeps[-1])
        assert clock.sleeps[n0 : n0 + 6] == [100, 200, 400, 800, 1600, INTERVAL]
        await m.close()

    asyncio.run(main())


def test_not_controller_is_retried_promptly() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.fail = [ErrorCode.not_controller] * 5
        m = _manager(ctl.send, clock)
        m.start()
        for n in range(1, 6):
            await _until(lambda n=n: len(clock.sleeps) == n, f"retry {n}")  # type: ignore[misc]
            clock.advance(clock.sleeps[-1])
        await m.wait_registered()
        assert clock.sleeps == [100] * 5
        await m.close()

    asyncio.run(main())


def test_stale_broker_epoch_registers_again() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        m = _manager(ctl.send, clock)
        m.start()
        await m.wait_unfenced()
        ctl.fail = [ErrorCode.stale_broker_epoch]
        ctl.epoch = 20
        n = len(ctl.requests)
        clock.advance(INTERVAL)
        await _until(lambda: len(clock.sleeps) == 2, "a backoff after the refusal")
        clock.advance(clock.sleeps[-1])
        await _until(lambda: len(ctl.requests) == n + 3, "registration and heartbeat")
        assert ctl.kinds()[n:] == [HB, REG, HB]
        assert m.broker_epoch == 20 and ctl.requests[-1][1].broker_epoch == 20
        assert m.state is BrokerState.RUNNING
        await m.close()

    asyncio.run(main())


def test_controlled_shutdown_heartbeats_until_the_controller_agrees() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.grant_shutdown = False
        m = _manager(ctl.send, clock)
        m.start()
        await m.wait_unfenced()
        n = len(ctl.requests)
        done = asyncio.ensure_future(m.controlled_shutdown(30))
        await _until(lambda: len(ctl.requests) == n + 1, "a heartbeat at once")
        assert m.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
        assert ctl.requests[-1][1].want_shut_down and clock.now == 0
        await _until(lambda: clock.sleeps[-1] == 50, "a quick second try")
        clock.advance(50)
        await _until(lambda: len(ctl.requests) == n + 2, "the second try")
        await _until(lambda: clock.sleeps[-1] == INTERVAL, "then every interval")
        ctl.grant_shutdown = True
        clock.advance(INTERVAL)
        assert await asyncio.wait_for(done, 5) is True
        assert m.state is BrokerState.SHUTTING_DOWN
        sent = len(ctl.requests)
        clock.advance(10 * INTERVAL)
        await asyncio.sleep(0.01)
        assert len(ctl.requests) == sent  # nothing after the go
        await m.close()

    asyncio.run(main())


def test_controlled_shutdown_gives_up_after_its_timeout() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.grant_shutdown = False
        m = _manager(ctl.send, clock)
        m.start()
        await m.wait_unfenced()
        done = asyncio.ensure_future(m.controlled_shutdown(3.0))
        await _until(lambda: 3000 in clock.sleeps, "the shutdown timer")
        clock.advance(2999)
        await asyncio.sleep(0.01)
        assert not done.done()
        clock.advance(1)
        assert await asyncio.wait_for(done, 5) is False
        await m.close()

    asyncio.run(main())


def test_no_controlled_shutdown_before_running() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.unfence = False
        m = _manager(ctl.send, clock)
        m.start()
        await m.wait_caught_up()
        assert await m.controlled_shutdown(30) is False
        assert m.state is BrokerState.SHUTTING_DOWN
        with pytest.raises(LifecycleStopped):
            await m.wait_unfenced()
        assert not any(b.want_shut_down for k, b in ctl.requests if k == HB)
        await m.close()

    asyncio.run(main())


def test_gives_up_registering_after_the_registration_timeout() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.fail = [ErrorCode.inconsistent_cluster_id] * 100
        m = _manager(ctl.send, clock, registration_timeout_ms=1000)
        m.start()
        waiting = asyncio.ensure_future(m.wait_registered())
        for n in range(1, 5):  # 100 + 200 + 400 + 800 ms
            await _until(lambda n=n: len(clock.sleeps) == n, f"attempt {n}")  # type: ignore[misc]
            clock.advance(clock.sleeps[-1])
        with pytest.raises(LifecycleStopped, match="INCONSISTENT_CLUSTER_ID"):
            await asyncio.wait_for(waiting, 5)
        assert m.state is BrokerState.SHUTTING_DOWN and len(ctl.requests) == 4
        await m.close()

    asyncio.run(main())


def test_close_stops_heartbeats_and_waiters() -> None:
    async def main() -> None:
        clock, ctl = FakeClock(), ScriptedController()
        ctl.unfence = False
        m = _manager(ctl.send, clock)
        m.start()
        await m.wait_caught_up()
        waiting = asyncio.ensure_future(m.wait_unfenced())
        await m.close()
        with pytest.raises(LifecycleStopped):
            await asyncio.wait_for(waiting, 5)
        sent = len(ctl.requests)
        clock.advance(10 * INTERVAL)
        await asyncio.sleep(0.01)
        assert len(ctl.requests) == sent

    asyncio.run(main())


def test_against_the_real_handlers_and_controller() -> None:
    """Manager -> BrokerLifecycleApi -> ClusterControl -> records, and back."""

    core: FakeCore = _core()

    async def main() -> None:
        clock = FakeClock()
        cc = ClusterControl(core, CLUSTER, 9000)
        api = BrokerLifecycleApi(lambda: cc, lambda ctx: True, clock.now_ms)
        handlers = {a.key: a.handler for a in api.apis()}

        async def send(key: int, body: Any) -> Any:
            version = int(type(body).__version__)
            header = RequestHeader(key, version, 1, "broker-1", 2)
            handler = handlers[key]
            assert handler is not None
            return await handler(RequestContext(header, "c", "CONTROLLER", "127.0.0.1"), body)

        m = _manager(send, clock, lambda: core.offset)
        m.start()
        await m.wait_unfenced()
        assert not core.image.brokers[1].fenced
        assert core.image.brokers[1].epoch == m.broker_epoch
        assert await m.controlled_shutdown(5) is True
        assert core.image.brokers[1].fenced
        await m.close()

    asyncio.run(main())

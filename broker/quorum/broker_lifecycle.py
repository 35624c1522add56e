"""The broker's side of its lifecycle with the active controller (Kafka's BrokerLifecycleManager).

A broker registers (BrokerRegistration, 62), then heartbeats (BrokerHeartbeat, 63) every
``broker.heartbeat.interval.ms``, reporting the metadata offset it has applied. Its states, as
Kafka's BrokerState names them:

    STARTING -> RECOVERY -> RUNNING -> PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN

STARTING until registered and the controller says it has caught up with the metadata log (it
heartbeats every 10 ms meanwhile, so a broker with nothing to replay is up quickly); RECOVERY
while still fenced; RUNNING once the controller unfenced it. ``controlled_shutdown`` asks to shut
down (WantShutDown) and waits until the controller has moved every partition leadership away and
answers ShouldShutDown; a broker that is not RUNNING skips that and shuts down at once.

Failures: ``send`` raising (no controller reachable, timeout) or an error answer is retried with
Kafka's backoff (100 ms doubling up to the session timeout; a registered broker's heartbeats up
to the heartbeat interval only: an attempt that timed out already took seconds, and a broker
that waited longer than its interval to try again after a heal would lose its session for
nothing); NOT_CONTROLLER is retried after
100 ms without growing it (``send`` looks for the new controller). STALE_BROKER_EPOCH (or
BROKER_ID_NOT_REGISTERED) means the controller no longer knows this registration: register
again. Nothing registered within ``initial.broker.registration.timeout.ms`` (60 s) stops the
manager, and ``wait_registered`` raises saying why, as Kafka shuts the broker down then.
``retries`` counts the attempts made again; a WARN names the request and the answer at most
once a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..network.retry_backoff import RetryBackoff

log = logging.getLogger(__name__)

BROKER_REGISTRATION: Final = 62
BROKER_HEARTBEAT: Final = 63
REGISTRATION_VERSION: Final = 4  # Kafka 4.1's
HEARTBEAT_VERSION: Final = 1
INITIAL_BACKOFF_MS: Final = 100
STARTING_HEARTBEAT_MS: Final = 10  # while catching up (Kafka's)
FIRST_SHUTDOWN_HEARTBEAT_MS: Final = 50  # after the first "not yet" to WantShutDown (Kafka's)
REGISTRATION_TIMEOUT_MS: Final = 60_000  # Kafka's initial.broker.registration.timeout.ms
MIN_ATTEMPT_MS: Final = 1000


def heartbeat_attempt_ms(interval_ms: int, session_timeout_ms: int) -> int:
    """How long one registration/heartbeat attempt waits for its answer before the connection
    is dropped and the next attempt reconnects (issue 31): two heartbeat intervals (at least
    1 s, a loaded controller answers late), at most half the session, so that a broker whose
    answer sits in a silent connection (a link that healed, TCP not yet retransmitting) tries a
    new one well before the controller fences it."""
    return max(1, min(session_timeout_ms // 2, max(2 * interval_ms, MIN_ATTEMPT_MS)))


_REREGISTER: Final = frozenset(
    {int(ErrorCode.stale_broker_epoch), int(ErrorCode.broker_id_not_registered)}
)

# (api key, request body) -> the active controller's response body; may raise
# ConnectionError / TimeoutError (or the network client's errors) when none answers
Send = Callable[[int, Any], Awaitable[Any]]
# (listener name, host, port, security protocol id)
Endpoint = tuple[str, str, int, int]


class BrokerState(enum.Enum):
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


class LifecycleStopped(Exception):
    """The manager stopped (closed, or could not register) before what was awaited happened."""


class Clock(Protocol):
    def now_ms(self) -> int: ...

    async def sleep_ms(self, ms: int) -> None: ...


class MonotonicClock:
    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep_ms(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)


class BrokerLifecycleManager:
    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[Endpoint],
        rack: str | None,
        features: Mapping[str, tuple[int, int]],
        send: Send,
        metadata_offset: Callable[[], int],
        *,
        clock: Clock | None = None,
        interval_ms: int = 2000,
        session_timeout_ms: int = 9000,
        registration_timeout_ms: int = REGISTRATION_TIMEOUT_MS,
        ready_to_unfence: bool = True,
    ) -> None:
        """``features``: name -> supported (min, max) levels. ``metadata_offset()``: the offset of
        the last metadata record this broker has applied. ``ready_to_unfence=False`` keeps asking
        to stay fenced (WantFence) until ``set_ready_to_unfence()``."""
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.incarnation_id = incarnation_id
        self._endpoints = list(endpoints)
        self._rack = rack
        self._features = dict(features)
        self._send = send
        self._metadata_offset = metadata_offset
        self._clock: Clock = clock or MonotonicClock()
        self._interval_ms = interval_ms
        self._max_backoff_ms = session_timeout_ms
        self._registration_timeout_ms = registration_timeout_ms
        self._ready_to_unfence = ready_to_unfence
        self._state = BrokerState.NOT_RUNNING
        self._epoch = -1
        self._registered = False
        self._failures = 0
        # counts and reports retries; the delays are Kafka's (``_after_failure``)
        self._retry_report = RetryBackoff(
            f"registration/heartbeat of broker {node_id}",
            INITIAL_BACKOFF_MS,
            max(INITIAL_BACKOFF_MS, session_timeout_ms),
            log,
        )
        self._shutdown_answered = False  # a first "not yet" to WantShutDown came
        self.is_fenced = True  # as the last heartbeat answer said
        self.last_error: str | None = None
        self._wake = asyncio.Event()
        self._registered_ev = asyncio.Event()
        self._caught_up_ev = asyncio.Event()
        self._unfenced_ev = asyncio.Event()
        self._shutdown_ev = asyncio.Event()  # the controller said ShouldShutDown
        self._stopped_ev = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- what the node asks --------------------------------------------------------------

    @property
    def state(self) -> BrokerState:
        return self._state

    @property
    def broker_epoch(self) -> int:
        return self._epoch

    def start(self) -> None:
        if self._task is None:
            self._state = BrokerState.STARTING
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"broker-lifecycle-{self.node_id}"
            )

    async def wait_registered(self) -> None:
        await self._until(self._registered_ev, "registered")

    async def wait_caught_up(self) -> None:
        await self._until(self._caught_up_ev, "caught up with the metadata log")

    async def wait_unfenced(self) -> None:
        await self._until(self._unfenced_ev, "unfenced")

    def set_ready_to_unfence(self) -> None:
        self._ready_to_unfence = True
        self._wake.set()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away and wait for its go; True when it said
        ShouldShutDown within ``timeout_s``. A broker not RUNNING skips it (False)."""
        if self._state is BrokerState.RUNNING:
            log.info("broker %d: beginning controlled shutdown", self.node_id)
            self._state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
            self._wake.set()  # tell the controller now
        elif self._state is not BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            log.info(
                "broker %d: no controlled shutdown in state %s", self.node_id, self._state.name
            )
            self._begin_shutdown()
            return self._shutdown_ev.is_set()  # True only if it was approved already
        granted = asyncio.ensure_future(self._shutdown_ev.wait())
        timer = asyncio.ensure_future(self._clock.sleep_ms(int(timeout_s * 1000)))
        try:
            await asyncio.wait({granted, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            granted.cancel()
            timer.cancel()
        if not self._shutdown_ev.is_set():
            log.warning(
                "broker %d: the controller did not approve the controlled shutdown within %.1f s",
                self.node_id,
                timeout_s,
            )
        return self._shutdown_ev.is_set()

    async def close(self) -> None:
        self._begin_shutdown()
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        started = self._clock.now_ms()
        while not self._stopping():
            if (
                not self._registered_ev.is_set()
                and self._clock.now_ms() - started >= self._registration_timeout_ms
            ):
                self.last_error = (
                    f"unable to register with the controller quorum within "
                    f"{self._registration_timeout_ms} ms (last: {self.last_error})"
                )
                log.error("broker %d: %s", self.node_id, self.last_error)
                self._begin_shutdown()
                return
            try:
                delay = await (self._heartbeat() if self._registered else self._register())
            except Exception as e:  # the send callable's errors: no controller answered
                self.last_error = f"{type(e).__name__}: {e}"
                log.info(
                    "broker %d: %s to the controller failed: %s",
                    self.node_id,
                    "heartbeat" if self._registered else "registration",
                    self.last_error,
                )
                delay = self._after_failure()
            if self._stopping():
                return
            await self._pause(delay)

    async def _pause(self, delay_ms: int) -> None:
        if self._wake.is_set() or delay_ms <= 0:
            self._wake.clear()
            await asyncio.sleep(0)
            return
        woken = asyncio.ensure_future(self._wake.wait())
        timer = asyncio.ensure_future(self._clock.sleep_ms(delay_ms))
        try:
            await asyncio.wait({woken, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            timer.cancel()
        self._wake.clear()

    @property
    def retries(self) -> int:
        """Registrations/heartbeats sent again after a failure or an error answer (a metric)."""
        return self._retry_report.retries

    def _after_failure(self) -> int:
        self._retry_report.failed(self.last_error or "no answer")
        cap = self._interval_ms if self._registered else self._max_backoff_ms
        delay = min(INITIAL_BACKOFF_MS * (1 << self._failures), max(INITIAL_BACKOFF_MS, cap))
        self._failures = min(self._failures + 1, 32)
        self._wake.clear()  # never at once after a failure
        return delay

    def _error(self, what: str, code: int) -> int:
        """The delay before the next attempt after an error answer."""
        self.last_error = f"{what}: {_name(code)}"
        if code == int(ErrorCode.not_controller):
            log.debug("broker %d: %s; asking the new controller", self.node_id, self.last_error)
            self._retry_report.failed(self.last_error)
            return INITIAL_BACKOFF_MS
        log.info("broker %d: %s", self.node_id, self.last_error)
        return self._after_failure()

    async def _register(self) -> int:
        body: Any = build(
            REGISTRY.spec(BROKER_REGISTRATION).request_type(REGISTRATION_VERSION),
            {
                "broker_id": self.node_id,
                "cluster_id": self.cluster_id,
                "incarnation_id": self.incarnation_id,
                "listeners": [
                    {"name": n, "host": h, "port": p, "security_protocol": sp}
                    for n, h, p, sp in self._endpoints
                ],
                "features": [
                    {"name": name, "min_supported_version": lo, "max_supported_version": hi}
                    for name, (lo, hi) in sorted(self._features.items())
                ],
                "rack": self._rack,
                "is_migrating_zk_broker": False,
                "log_dirs": [],
                "previous_broker_epoch": -1,
            },
        )
        resp = await self._send(BROKER_REGISTRATION, body)
        code = _code(resp)
        if code != 0:
            return self._error("registration refused", code)
        self._failures = 0
        self._epoch = int(resp.broker_epoch)
        self._registered = True
        self._registered_ev.set()
        log.info("broker %d: registered with broker epoch %d", self.node_id, self._epoch)
        return 0  # heartbeat at once

    async def _heartbeat(self) -> int:
        body: Any = build(
            REGISTRY.spec(BROKER_HEARTBEAT).request_type(HEARTBEAT_VERSION),
            {
                "broker_id": self.node_id,
                "broker_epoch": self._epoch,
                "current_metadata_offset": self._metadata_offset(),
                "want_fence": not self._ready_to_unfence,
                "want_shut_down": self._state is BrokerState.PENDING_CONTROLLED_SHUTDOWN,
            },
        )
        resp = await self._send(BROKER_HEARTBEAT, body)
        code = _code(resp)
        if code in _REREGISTER:
            self._registered = False
            return self._error(
                f"heartbeat with epoch {self._epoch} refused; registering again", code
            )
        if code != 0:
            return self._error("heartbeat refused", code)
        self._failures = 0
        self.is_fenced = bool(resp.is_fenced)
        return self._on_heartbeat(
            bool(resp.is_caught_up), self.is_fenced, bool(resp.should_shut_down)
        )

    def _on_heartbeat(self, caught_up: bool, fenced: bool, should_shut_down: bool) -> int:
        state = self._state
        if state is BrokerState.STARTING:
            if not caught_up:
                return STARTING_HEARTBEAT_MS
            log.info("broker %d: caught up with the metadata log: RECOVERY", self.node_id)
            self._state = state = BrokerState.RECOVERY
            self._caught_up_ev.set()
        if state is BrokerState.RECOVERY:
            if not fenced:
                log.info("broker %d: unfenced: RUNNING", self.node_id)
                self._state = BrokerState.RUNNING
                self._unfenced_ev.set()
            return self._interval_ms
        if state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if should_shut_down:
                log.info("broker %d: the controller approved the shutdown", self.node_id)
                self._shutdown_ev.set()
                self._begin_shutdown()
                return 0
            first = not self._shutdown_answered
            self._shutdown_answered = True
            return FIRST_SHUTDOWN_HEARTBEAT_MS if first else self._interval_ms
        return self._interval_ms  # RUNNING: a fencing by the controller is lifted by it

    def _stopping(self) -> bool:
        return self._state is BrokerState.SHUTTING_DOWN

    def _begin_shutdown(self) -> None:
        self._state = BrokerState.SHUTTING_DOWN
        self._stopped_ev.set()
        self._wake.set()

    async def _until(self, event: asyncio.Event, what: str) -> None:
        if not event.is_set() and not self._stopped_ev.is_set():
            done = asyncio.ensure_future(event.wait())
            stopped = asyncio.ensure_future(self._stopped_ev.wait())
            try:
                await asyncio.wait({done, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                done.cancel()
                stopped.cancel()
        if not event.is_set():
            raise LifecycleStopped(
                f"broker {self.node_id} stopped before it was {what}"
                + (f" ({self.last_error})" if self.last_error else "")
            )


def _code(resp: Any) -> int:
    code = getattr(resp, "error_code", 0)
    return int(getattr(code, "value", code))


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"

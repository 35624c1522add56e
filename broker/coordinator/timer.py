"""Clocks and one-shot timers, injected so tests drive time by hand."""

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Wall clock (ms since epoch) plus one-shot callbacks after a delay."""

    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable: ...


class LoopScheduler:
    """Real time on the running asyncio loop."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """Time moves only through `advance`; due callbacks run in deadline order."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._seq = itertools.count()
        self._heap: list[tuple[int, int, _ManualHandle, Callable[[], None]]] = []

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        handle = _ManualHandle()
        heapq.heappush(
            self._heap, (self._now + max(delay_ms, 0), next(self._seq), handle, callback)
        )
        return handle

    async def advance(
        self, delta_ms: int, settle: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Move time forward, firing due callbacks one by one. `settle` is awaited after
        each one so work they start (and timers that work schedules) runs in order."""
        target = self._now + delta_ms
        while self._heap and self._heap[0][0] <= target:
            when, _, handle, callback = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            self._now = max(self._now, when)
            callback()
            if settle is not None:
                await settle()
        self._now = target
        if settle is not None:
            await settle()

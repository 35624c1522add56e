"""Notices when the event loop did not run for a while (a long synchronous step, a slow disk, a
SIGSTOP): the quorum and the active controller must not read such a gap as silence of others.

A task looks every ``tick_ms``; anyone may look too (``observe``), and everyone who acts on time
looks first, so a gap is noticed by the first code that runs after it, whichever that is. A gap
between two looks longer than ``threshold_ms`` is a stall: counted (``stalls``), its length added
to ``stalled_ms`` (beyond one tick, which is the normal gap), and its end kept (``last_end_ms``).
Monotonic time: a wall clock step is no stall.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

STALL_THRESHOLD_MS = 1000
TICK_MS = 100


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class StallWatch:
    def __init__(
        self,
        now_ms: Callable[[], int] = monotonic_ms,
        threshold_ms: int = STALL_THRESHOLD_MS,
        tick_ms: int = TICK_MS,
    ) -> None:
        if not 0 < tick_ms < threshold_ms:
            raise ValueError(
                f"stall watch: tick {tick_ms} ms must be above 0 and below the threshold "
                f"{threshold_ms} ms"
            )
        self._now_ms = now_ms
        self.threshold_ms = threshold_ms
        self.tick_ms = tick_ms
        self._last = now_ms()
        self.stalls = 0
        self.stalled_ms = 0
        self.last_end_ms = -1

    def begin(self) -> None:
        """Start watching from now (what came before, such as a node's start, is no stall)."""
        self._last = max(self._last, self._now_ms())

    def observe(self) -> int:
        """Look now; the number of stalls seen so far (this one included)."""
        now = self._now_ms()
        gap = now - self._last
        self._last = max(self._last, now)
        if gap > self.threshold_ms:
            self.stalls += 1
            self.stalled_ms += gap - self.tick_ms
            self.last_end_ms = now
            log.warning(
                "stall watch: the event loop did not run for %d ms: a quorum leader confirms "
                "its leadership again before it acts on a timer",
                gap,
            )
        return self.stalls

    def stalled_now(self) -> int:
        """Look now; how long the loop has stalled in all so far (``stalled_ms``)."""
        self.observe()
        return self.stalled_ms

    async def run(self) -> None:
        while True:
            self.observe()
            await asyncio.sleep(self.tick_ms / 1000)

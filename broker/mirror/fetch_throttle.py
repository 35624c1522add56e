"""Byte rates of the mirror fetchers: each partition's bytes per second (`ByteRate`, shown by
--describe) and the destination's mirror replication throttle (`TokenBucket`), which every
fetcher of the node shares.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

RATE_WINDOW_S: Final = 1.0
THROTTLE_BURST_S: Final = 0.2  # tokens a throttled fetcher may save up, in seconds of rate


class ByteRate:
    """Bytes per second over the current and the previous one-second window."""

    __slots__ = ("_cur", "_prev", "_start")

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._cur = 0
        self._prev = 0

    def _roll(self, now: float) -> None:
        elapsed = now - self._start
        if elapsed >= RATE_WINDOW_S:
            self._prev = self._cur if elapsed < 2 * RATE_WINDOW_S else 0
            self._cur = 0
            self._start = now - (elapsed % RATE_WINDOW_S)

    def record(self, nbytes: int) -> None:
        self._roll(time.monotonic())
        self._cur += nbytes

    def rate(self) -> float:
        now = time.monotonic()
        self._roll(now)
        return (self._prev + self._cur) / (RATE_WINDOW_S + (now - self._start))


class TokenBucket:
    """The destination's mirror replication throttle, shared by every fetcher.

    Fetchers wait while the bucket is in debt and pay for each response after the fact (as Kafka
    quotas do); requests are also capped so one response cannot overshoot by much.
    """

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self.rate: float | None = None
        self._tokens = 0.0
        self._last = monotonic()

    def _refill(self) -> None:
        now = self._monotonic()
        if self.rate is not None:
            burst = self.rate * THROTTLE_BURST_S
            self._tokens = min(burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def set_rate(self, rate: float | None) -> None:
        self._refill()
        self.rate = rate if rate is not None and rate > 0 else None
        if self.rate is None:
            self._tokens = 0.0

    def delay(self) -> float:
        """Seconds to wait before the next fetch."""
        self._refill()
        if self.rate is None or self._tokens >= 0:
            return 0.0
        return -self._tokens / self.rate

    def consume(self, nbytes: int) -> None:
        if self.rate is not None:
            self._refill()
            self._tokens -= nbytes

    def request_cap(self) -> int | None:
        return None if self.rate is None else max(1, int(self.rate * THROTTLE_BURST_S))

"""How a node-to-node request is retried where nobody sees it: capped exponential backoff, a
count of retries (a metric), and a WARN that names the request and the answer at most once per
interval, so a loop that never succeeds is visible without flooding the log (issue 27: an
AlterPartition resent every 50 ms for minutes, 13,500 lines in 4 minutes)."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Final

WARN_INTERVAL_S: Final = 60.0


class RetryBackoff:
    def __init__(
        self,
        request: str,
        initial_ms: int,
        max_ms: int,
        logger: logging.Logger,
        *,
        warn_interval_s: float = WARN_INTERVAL_S,
        jitter: float = 0.2,
        monotonic: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if initial_ms <= 0 or max_ms < initial_ms:
            raise ValueError(f"backoff of {request}: need 0 < initial {initial_ms} <= max {max_ms}")
        self.request = request
        self._initial_ms = initial_ms
        self._max_ms = max_ms
        self._log = logger
        self._warn_interval_s = warn_interval_s
        self._jitter = jitter
        self._monotonic = monotonic
        self._rng = rng or random.Random()
        self._attempt = 0  # consecutive failures
        self._last_warn: float | None = None
        self._suppressed = 0
        self.retries = 0  # total, for the retries metric

    def failed(self, answer: str) -> float:
        """One more failed attempt, whose answer was ``answer``: the pause before the next, in
        seconds (doubling from the initial backoff up to the cap, with some jitter)."""
        self.retries += 1
        delay_ms = min(self._initial_ms * (1 << min(self._attempt, 30)), self._max_ms)
        self._attempt += 1
        self.warn(answer)
        spread = 1.0 + self._jitter * (2 * self._rng.random() - 1)
        return max(0.0, delay_ms * spread / 1000)

    def succeeded(self) -> None:
        self._attempt = 0

    @property
    def consecutive_failures(self) -> int:
        return self._attempt

    def warn(self, answer: str) -> None:
        """WARN naming the request and ``answer``, unless one was logged within the interval
        (those are counted and the count is given with the next)."""
        now = self._monotonic()
        if self._last_warn is not None and now - self._last_warn < self._warn_interval_s:
            self._suppressed += 1
            return
        more = (
            f" ({self._suppressed} more like it since the last warning)" if self._suppressed else ""
        )
        self._log.warning(
            "%s: %s; retrying (%d retries so far)%s", self.request, answer, self.retries, more
        )
        self._last_warn = now
        self._suppressed = 0

"""Says, while a start-up step takes long, what the node is waiting for.

Log recovery and metadata replay block the event loop, so the reporter is a daemon thread: once a
step has run ``first_s`` seconds, and every ``every_s`` seconds after, it logs (INFO) what the
step is doing. An operator who sees a node silent for minutes then knows it is recovering logs,
not hung.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

log = logging.getLogger("kmirror")

FIRST_REPORT_S = 2.0
REPORT_EVERY_S = 5.0
_TICK_S = 0.25


class StartupProgress:
    def __init__(self, first_s: float = FIRST_REPORT_S, every_s: float = REPORT_EVERY_S) -> None:
        self._first, self._every = first_s, every_s
        # written by the start-up (main) thread only; the reporter reads it
        self._step: tuple[Callable[[], str], float] | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._report, name="startup-progress", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def step(self, what: str | Callable[[], str]) -> Iterator[None]:
        """``what`` describes the step; a callable is read at each report (the current part)."""
        self._step = (what if callable(what) else (lambda: what), time.monotonic())
        try:
            yield
        finally:
            self._step = None

    def close(self) -> None:
        self._done.set()

    def _report(self) -> None:
        seen: tuple[Callable[[], str], float] | None = None
        next_at = 0.0
        while not self._done.wait(_TICK_S):
            step = self._step
            if step is None:
                continue
            describe, started = step
            if step is not seen:
                seen, next_at = step, started + self._first
            now = time.monotonic()
            if now < next_at:
                continue
            next_at = now + self._every
            try:
                what = describe()
            except Exception:  # a racy read of start-up state: say less rather than nothing
                what = "starting"
            log.info("start-up: still %s (%.0fs)", what, now - started)

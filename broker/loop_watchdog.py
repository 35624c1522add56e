"""Where the event loop stalls: a thread that notices when the loop has not run its tick for
``warn_after_s`` and logs the loop thread's stack at that moment, then how long the stall
lasted once the loop runs again.

Everything on a node (Raft, replication, client requests) shares one loop, so a call that holds
it for seconds makes the quorum elect another leader and clients time out; without this the
log shows only a gap. Stalls are counted for the metrics (`stalls`, `stalled_seconds`,
`longest_s`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from typing import Final

log = logging.getLogger(__name__)

TICK_S: Final = 0.1
DEFAULT_WARN_AFTER_S: Final = 1.0


class LoopWatchdog:
    def __init__(self, warn_after_s: float = DEFAULT_WARN_AFTER_S) -> None:
        self._warn_after_s = warn_after_s
        self._last_tick = time.monotonic()
        self._loop_thread_id: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stalls = 0
        self.stalled_seconds = 0.0
        self.longest_s = 0.0

    def start(self) -> None:
        """From the loop's thread."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        self._tick()
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._thread is not None:
            self._thread.join(timeout=1)

    def _tick(self) -> None:
        self._last_tick = time.monotonic()
        assert self._loop is not None
        self._handle = self._loop.call_later(TICK_S, self._tick)

    def _watch(self) -> None:
        stalled_since: float | None = None
        while not self._stop.wait(TICK_S):
            last = self._last_tick
            lag = time.monotonic() - last - TICK_S
            if stalled_since is None:
                if lag >= self._warn_after_s:
                    stalled_since = last
                    self.stalls += 1
                    log.warning(
                        "event loop stalled for %.1f s so far, in:\n%s", lag, self._loop_stack()
                    )
            elif last > stalled_since:  # ticked again: the stall is over
                took = last - stalled_since - TICK_S
                self.stalled_seconds += took
                self.longest_s = max(self.longest_s, took)
                log.warning("event loop ran again after a %.1f s stall", took)
                stalled_since = None

    def _loop_stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread_id or -1)
        if frame is None:
            return "  (no stack)"
        return "".join(traceback.format_stack(frame, limit=25)).rstrip()

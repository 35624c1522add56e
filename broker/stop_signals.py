"""SIGTERM/SIGINT stop a node at any point of its life, start-up included.

Start-up is partly synchronous (log recovery, metadata replay block the event loop), so a signal
handler the loop runs (``loop.add_signal_handler``) would wait for it to end. Python-level
handlers instead run in the main thread at the next bytecode, so:

- until `attach` (config, storage checks, log recovery), the handler raises
  `StartupInterrupted`, which unwinds the synchronous work in progress;
- once the event loop drives start-up or serving, it schedules the stop callback on the loop.

One handler raises at most once: a second signal during the unwinding only records itself.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StartupInterrupted(BaseException):
    """A stop signal arrived during synchronous start-up work (BaseException, as
    KeyboardInterrupt: ``except Exception`` handlers on the way must not swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """Owns SIGTERM and SIGINT from `install` until `restore`."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._raise = True
        self._raised = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_stop: Callable[[], None] | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def attach(self, loop: asyncio.AbstractEventLoop, on_stop: Callable[[], None]) -> None:
        """From now on a signal calls ``on_stop`` on ``loop`` (at once if one came already)."""
        self._loop, self._on_stop, self._raise = loop, on_stop, False
        if self.received is not None:
            loop.call_soon(on_stop)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signal.Signals(signum)
        if self._raise and not self._raised:
            self._raised = True
            raise StartupInterrupted(signum)
        if self._loop is not None and self._on_stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._on_stop)

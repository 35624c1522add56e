"""A server's open connections: the table its connections report to (`ConnectionOwner`), the
idle sweep (``connections.max.idle.ms``) and the drain at shutdown.

Idle connections are found by one periodic sweep, not a timer each (no re-arming on every read).
"""

import asyncio
import logging
from collections.abc import Callable, Iterator

from .connection_protocol import Connection
from .stats import ServerCounters

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")


class OpenConnections:
    """The connections set up and not lost yet. ``on_closed`` gets each one that goes (and
    gives its place in the connection quotas back)."""

    def __init__(self, counters: ServerCounters, on_closed: Callable[[Connection], None]) -> None:
        self._counters = counters
        self._on_closed = on_closed
        self._open: set[Connection] = set()
        self._index = 0
        self.closing = False  # the server is stopping: a connection set up now is dropped

    def __iter__(self) -> Iterator[Connection]:
        return iter(list(self._open))  # a copy: closing one changes the set

    def __len__(self) -> int:
        return len(self._open)

    # -- ConnectionOwner

    def next_index(self) -> int:
        index = self._index
        self._index += 1
        return index

    def opened(self, conn: Connection) -> None:
        if self.closing:
            conn.shutdown(abort=True)
            return
        self._open.add(conn)
        self._counters.connections_open += 1
        self._counters.connections_total += 1

    def closed(self, conn: Connection) -> None:
        if conn in self._open:
            self._open.discard(conn)
            self._counters.connections_open -= 1
        self._on_closed(conn)

    # -- for the server

    def resume_reading(self) -> None:
        """The request memory has room again: connections it held up read on."""
        for conn in list(self._open):
            if not conn.closing:
                conn.resume_after_memory()

    async def sweep_idle(self, idle_ms: int, monotonic: Callable[[], float]) -> None:
        """Close connections with nothing in flight for ``idle_ms``; runs until cancelled."""
        interval = max(0.005, min(1.0, idle_ms / 4000))
        while True:
            await asyncio.sleep(interval)
            deadline = monotonic() - idle_ms / 1000
            for conn in list(self._open):
                # A connection with requests in flight (e.g. a long-polling fetch) is not idle.
                if conn.last_active < deadline and conn.inflight == 0 and not conn.closing:
                    log.info("closing idle connection %s", conn.name())
                    self._counters.idle_closed += 1
                    conn.shutdown(abort=False)

    def stop_taking(self) -> None:
        """From now on a connection that gets set up is dropped at once."""
        self.closing = True

    async def close_all(self, timeout: float) -> None:
        """Take no more connections; let pending responses be written (up to ``timeout``
        seconds), then close every connection."""
        self.closing = True
        conns = list(self._open)
        if conns and timeout > 0:
            waits = [c.start_draining() for c in conns]
            await asyncio.wait(waits, timeout=timeout)
        for c in conns:
            c.shutdown(abort=False)
        # Give transports a moment to report connection_lost so counters settle.
        for _ in range(100):
            if not self._open:
                break
            await asyncio.sleep(0.01)

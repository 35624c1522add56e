"""The node's request memory: ``queued_max_request_bytes`` (queued.max.request.bytes) bounds
the request bytes all connections hold, as Kafka's memory pool does.

A large frame reserves its announced size when its bytes start to arrive (its own array; a frame
is never split), a small one its size when it is complete, and both are given back once the
response is written. At or past the bound no connection starts a new frame, and every connection
stops reading, except those in the middle of a frame already reserved: they read it to its end,
so reservations always complete and are given back. The pool may go past its bound by one frame,
like Kafka's (non-strict): the node holds at most the bound plus ``socket.request.max.bytes``,
plus the first bytes of frames buffered in each connection's chunk. As in Kafka, a reservation
lasts as long as its frame takes to arrive: with a bound set, clients that announce large frames
and send them slowly hold up the others (until ``connections.max.idle.ms`` closes them), which
is why the default is no bound.
"""

import logging
from collections.abc import Callable

from .connection_protocol import _Connection, _Slot

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")


class RequestMemory:
    """`KafkaServer`'s request memory accounting (a mixin: the state is the server's, set up by
    it); called by its connections for every request."""

    monotonic: Callable[[], float]
    queued_max_request_bytes: int
    queued_request_bytes: int
    memory_full: bool
    _depleted_seconds: float
    _depleted_since: float
    _depleted_times: int
    _depleted_logged: float | None
    _connections: set[_Connection]

    def _hold(self, slot: _Slot, reserved: int = 0) -> None:
        """``slot``'s request bytes are held until its response is written (``reserved`` of
        them already are: the frame's reservation)."""
        self._reserve(slot.size - reserved)

    def _release(self, slot: _Slot) -> None:
        size, slot.size = slot.size, 0
        self._unreserve(size)

    def _reserve(self, nbytes: int) -> None:
        self.queued_request_bytes += nbytes
        bound = self.queued_max_request_bytes
        if bound > 0 and self.queued_request_bytes >= bound and not self.memory_full:
            self.memory_full = True
            self._depleted_since = now = self.monotonic()
            self._depleted_times += 1
            if self._depleted_logged is None or now - self._depleted_logged >= 60:
                # a node at its bound may cross it at every request: not a line for each
                self._depleted_logged = now
                log.info(
                    "queued.max.request.bytes (%d) reached (%d times so far): reading paused "
                    "until requests are answered",
                    bound,
                    self._depleted_times,
                )

    def _unreserve(self, nbytes: int) -> None:
        self.queued_request_bytes -= nbytes
        if self.memory_full and self.queued_request_bytes < self.queued_max_request_bytes:
            self.memory_full = False
            self._depleted_seconds += self.monotonic() - self._depleted_since
            for conn in list(self._connections):
                if not conn.closing:
                    conn.resume_after_memory()

    @property
    def memory_depleted_seconds(self) -> float:
        """Seconds the request memory has spent at queued.max.request.bytes, in all."""
        current = self.monotonic() - self._depleted_since if self.memory_full else 0.0
        return self._depleted_seconds + current

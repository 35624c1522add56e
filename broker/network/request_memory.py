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

`RequestMemory` knows nothing of connections: each connection reserves and gives back bytes, and
the server passes in what to do when reading may start again (``on_free``).
"""

import logging
from collections.abc import Callable

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")


class RequestMemory:
    """The request bytes held by all of a server's connections, against one bound.

    ``bound`` <= 0: no bound (``full`` never turns true). ``on_free`` is called when the bytes
    held fall back under the bound: the connections paused by it may read again.
    """

    __slots__ = (
        "_depleted_logged",
        "_depleted_seconds",
        "_depleted_since",
        "_depleted_times",
        "_monotonic",
        "_on_free",
        "bound",
        "full",
        "queued_bytes",
    )

    def __init__(
        self, bound: int, monotonic: Callable[[], float], on_free: Callable[[], None]
    ) -> None:
        self.bound = bound
        self.queued_bytes = 0
        self.full = False  # every connection stops starting new frames (read on each request)
        self._monotonic = monotonic
        self._on_free = on_free
        self._depleted_seconds = 0.0  # time spent at the bound, past periods
        self._depleted_since = 0.0
        self._depleted_times = 0
        self._depleted_logged: float | None = None

    def reserve(self, nbytes: int) -> None:
        """Hold ``nbytes`` more (a request until its response is written, or a large frame's
        announced size while it arrives)."""
        self.queued_bytes += nbytes
        bound = self.bound
        if bound > 0 and self.queued_bytes >= bound and not self.full:
            self.full = True
            self._depleted_since = now = self._monotonic()
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

    def unreserve(self, nbytes: int) -> None:
        """Give back ``nbytes`` held by `reserve`."""
        self.queued_bytes -= nbytes
        if self.full and self.queued_bytes < self.bound:
            self.full = False
            self._depleted_seconds += self._monotonic() - self._depleted_since
            self._on_free()

    @property
    def depleted_seconds(self) -> float:
        """Seconds spent at queued.max.request.bytes, in all."""
        current = self._monotonic() - self._depleted_since if self.full else 0.0
        return self._depleted_seconds + current

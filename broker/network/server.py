"""The broker's listener: Kafka framing over asyncio, one `BufferedProtocol` per connection.

`KafkaServer` listens on its listeners and feeds each complete request frame to an injected
async handler; its parts, one module each:

- `listener`: a listener's definition and its listening sockets;
- `acceptor`: one accept task per listening socket, applying the connection limits;
- `connection_protocol`: one connection: framing, pipelined requests, responses in order;
- `request_memory`: ``queued.max.request.bytes`` across connections;
- `handler`: what the handler gets (`ConnectionContext`) and returns (`Response`).

Idle connections (``connections.max.idle.ms``) are found by one periodic sweep, not a timer each.

The server is the last line of defence: a bad frame size or a handler exception closes that one
connection, and nothing a client sends reaches the event loop's exception handler.
"""

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

from protocol.framing import DEFAULT_MAX_FRAME_BYTES

from .acceptor import ACCEPT_BATCH, Acceptor
from .connection_protocol import _Connection
from .connection_quotas import UNLIMITED, ConnectionLimits, ConnectionQuotas, ListenerStats
from .handler import Buffer, ConnectionContext, Handler, Response
from .listener import ACCEPT_BACKLOG, Listener, _listen
from .request_memory import RequestMemory

__all__ = [
    "ACCEPT_BACKLOG",
    "ACCEPT_BATCH",
    "DEFAULT_IDLE_MS",
    "DEFAULT_MAX_INFLIGHT",
    "DEFAULT_WRITE_HIGH_WATER",
    "DEFAULT_WRITE_LOW_WATER",
    "Buffer",
    "ConnectionContext",
    "Handler",
    "KafkaServer",
    "Listener",
    "Response",
]

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")

DEFAULT_MAX_INFLIGHT: Final = 100
DEFAULT_IDLE_MS: Final = 600_000  # connections.max.idle.ms
DEFAULT_WRITE_HIGH_WATER: Final = 4 * 1024 * 1024
DEFAULT_WRITE_LOW_WATER: Final = 1024 * 1024


class KafkaServer(Acceptor, RequestMemory):
    """Listens on ``listeners`` and feeds each complete request frame to ``handler``.

    ``handler(conn, frame)`` gets the request payload (no size prefix) and returns the response
    payload (no size prefix) as a list of buffers, or None when the request has no response
    (Produce with acks=0). An exception from it closes that connection.
    """

    def __init__(
        self,
        listeners: Sequence[Listener],
        handler: Handler,
        *,
        max_request_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
        idle_ms: int = DEFAULT_IDLE_MS,
        write_high_water: int = DEFAULT_WRITE_HIGH_WATER,
        write_low_water: int = DEFAULT_WRITE_LOW_WATER,
        queued_max_request_bytes: int = -1,
        max_connections: int = UNLIMITED,
        max_connections_per_ip: int = UNLIMITED,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        max_connection_creation_rate: int = UNLIMITED,
        listener_max_connections: Mapping[str, int] | None = None,
        listener_max_connection_creation_rate: Mapping[str, int] | None = None,
        inter_broker_listener: str | None = None,
        unlimited_listeners: frozenset[str] = frozenset(),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not listeners:
            raise ValueError("at least one listener is needed")
        if max_inflight < 1:
            raise ValueError("max_inflight must be at least 1")
        self.listeners = list(listeners)
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.max_inflight = max_inflight
        self.idle_ms = idle_ms
        self.write_high_water = write_high_water
        self.write_low_water = write_low_water
        # queued.max.request.bytes: request bytes held by all connections until their responses
        # are written; at the bound every connection stops reading (Kafka's MemoryPool). <= 0:
        # no bound.
        self.queued_max_request_bytes = queued_max_request_bytes
        self.queued_request_bytes = 0
        self.memory_full = False
        self._depleted_seconds = 0.0  # time spent at the bound, past periods
        self._depleted_since = 0.0
        self._depleted_times = 0
        self._depleted_logged: float | None = None
        # The connection limits (see connection_quotas); listeners in ``unlimited_listeners``
        # (the controller's) are exempt. Checked when a connection is accepted, never after.
        self.quotas = ConnectionQuotas(
            ConnectionLimits(
                max_connections=max_connections,
                max_connections_per_ip=max_connections_per_ip,
                per_ip_overrides=dict(max_connections_per_ip_overrides or {}),
                max_creation_rate=max_connection_creation_rate,
                listener_max_connections=dict(listener_max_connections or {}),
                listener_creation_rate=dict(listener_max_connection_creation_rate or {}),
                inter_broker_listener=inter_broker_listener,
                exempt_listeners=unlimited_listeners,
                listeners=frozenset(lst.name for lst in listeners),
            ),
            monotonic(),
        )
        self.rejected: dict[str, int] = {}  # limit's config key -> connections closed at accept
        # KIP-612 per-IP connection_creation_rate (a client quota): ip -> seconds the new
        # connection is held before it is closed unserved (0: serve it); None: no such quotas
        self.ip_throttle: Callable[[str], float] | None = None
        self.listener_stats = {lst.name: ListenerStats() for lst in listeners}
        self._slot_waiters: list[asyncio.Future[None]] = []
        self._accept_locks: dict[str, asyncio.Lock] = {}
        self._accepting: set[asyncio.Task[None]] = set()
        self._listening: list[socket.socket] = []
        self.monotonic = monotonic
        self.closing = False
        self._bound: dict[str, tuple[str, int]] = {}
        self._connections: set[_Connection] = set()
        self._index = 0
        self._sweeper: asyncio.Task[None] | None = None
        # Counters, read by the metrics layer.
        self.connections_open = 0
        self.connections_total = 0
        self.requests = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.idle_closed = 0

    async def start(self, only: Collection[str] | None = None) -> None:
        """Listen on every listener, or on those named in ``only`` (a node opens its controller
        listener before it has metadata to serve clients with); a later call opens the rest."""
        loop = asyncio.get_running_loop()
        try:
            for listener in self.listeners:
                if listener.name in self._bound or (only is not None and listener.name not in only):
                    continue
                socks = await _listen(listener.host, listener.port)
                self._listening.extend(socks)
                self._bound[listener.name] = (listener.host, int(socks[0].getsockname()[1]))
                for sock in socks:
                    task = loop.create_task(self._accept_loop(listener, sock))
                    self._accepting.add(task)
                    task.add_done_callback(self._accepting.discard)
        except BaseException:
            await self.close(timeout=0)
            raise
        if self._sweeper is None and self.idle_ms >= 0:  # connections.max.idle.ms -1: never
            self._sweeper = loop.create_task(self._sweep_idle())

    async def __aenter__(self) -> "KafkaServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def bound_ports(self) -> dict[str, int]:
        """Listener name -> the port actually bound (useful with port 0)."""
        return {name: port for name, (_, port) in self._bound.items()}

    def address(self, listener: str | None = None) -> tuple[str, int]:
        """(host, bound port) of a listener; the first one by default."""
        name = listener if listener is not None else self.listeners[0].name
        return self._bound[name]

    @property
    def connections(self) -> list[ConnectionContext]:
        return [c.ctx for c in self._connections if c.ctx is not None]

    async def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, let pending responses be written (up to ``timeout`` seconds), then
        close every connection."""
        if self.closing:
            return
        self.closing = True
        accepting = list(self._accepting)
        for task in accepting:
            task.cancel()
        if accepting:  # they stop watching the listening sockets before these are closed
            await asyncio.wait(accepting, timeout=1.0)
        for sock in self._listening:
            sock.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        conns = list(self._connections)
        if conns and timeout > 0:
            waits = [c.start_draining() for c in conns]
            await asyncio.wait(waits, timeout=timeout)
        for c in conns:
            c.shutdown(abort=False)
        # Give transports a moment to report connection_lost so counters settle.
        for _ in range(100):
            if not self._connections:
                break
            await asyncio.sleep(0.01)

    # -- bookkeeping called by connections

    def _next_index(self) -> int:
        index = self._index
        self._index += 1
        return index

    def _connection_opened(self, conn: _Connection) -> None:
        if self.closing:
            conn.shutdown(abort=True)
            return
        self._connections.add(conn)
        self.connections_open += 1
        self.connections_total += 1

    def _connection_closed(self, conn: _Connection) -> None:
        if conn in self._connections:
            self._connections.discard(conn)
            self.connections_open -= 1
        self._release_quota(conn)

    async def _sweep_idle(self) -> None:
        # One timer for all connections instead of re-arming a timer on every read.
        interval = max(0.005, min(1.0, self.idle_ms / 4000))
        while True:
            await asyncio.sleep(interval)
            deadline = self.monotonic() - self.idle_ms / 1000
            for conn in list(self._connections):
                # A connection with requests in flight (e.g. a long-polling fetch) is not idle.
                if conn.last_active < deadline and conn.inflight == 0 and not conn.closing:
                    log.info("closing idle connection %s", conn._name())
                    self.idle_closed += 1
                    conn.shutdown(abort=False)

"""The broker's listener: Kafka framing over asyncio, one `BufferedProtocol` per connection.

`KafkaServer` listens on its listeners and feeds each complete request frame to an injected
async handler. It is built from parts that know nothing of it, one module each, each given what
it needs when the server makes it:

- `listener`: a listener's definition and its listening sockets;
- `admission`: the connection limits (``max.connections`` and the rest) applied at accept;
- `acceptor`: one accept task per listening socket, admitting and serving new connections;
- `connection_protocol`: one connection: framing, pipelined requests, responses in order;
- `open_connections`: the open connections, the idle sweep, the drain at shutdown;
- `request_memory`: ``queued.max.request.bytes`` across connections;
- `handler`: what the handler gets (`ConnectionContext`) and returns (`Response`).

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
from .admission import Admission
from .connection_protocol import ConnectionEnv
from .connection_quotas import UNLIMITED, ConnectionLimits, ConnectionQuotas, ListenerStats
from .handler import Buffer, ConnectionContext, Handler, Response
from .listener import ACCEPT_BACKLOG, Listener, _listen
from .open_connections import OpenConnections
from .request_memory import RequestMemory
from .stats import ServerCounters

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


class KafkaServer:
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
        self.monotonic = monotonic
        self.counters = ServerCounters()
        names = frozenset(lst.name for lst in listeners)
        # The connection limits (see connection_quotas); listeners in ``unlimited_listeners``
        # (the controller's) are exempt. Checked when a connection is accepted, never after.
        self.admission = Admission(
            ConnectionQuotas(
                ConnectionLimits(
                    max_connections=max_connections,
                    max_connections_per_ip=max_connections_per_ip,
                    per_ip_overrides=dict(max_connections_per_ip_overrides or {}),
                    max_creation_rate=max_connection_creation_rate,
                    listener_max_connections=dict(listener_max_connections or {}),
                    listener_creation_rate=dict(listener_max_connection_creation_rate or {}),
                    inter_broker_listener=inter_broker_listener,
                    exempt_listeners=unlimited_listeners,
                    listeners=names,
                ),
                monotonic(),
            ),
            names,
            monotonic,
        )
        self.open_connections = OpenConnections(self.counters, self.admission.release)
        # queued.max.request.bytes: request bytes held by all connections until their responses
        # are written; at the bound every connection stops reading (Kafka's MemoryPool). <= 0:
        # no bound.
        self.memory = RequestMemory(
            queued_max_request_bytes, monotonic, self.open_connections.resume_reading
        )
        env = ConnectionEnv(
            handler=handler,
            memory=self.memory,
            counters=self.counters,
            owner=self.open_connections,
            max_request_bytes=max_request_bytes,
            max_inflight=max_inflight,
            write_high_water=write_high_water,
            write_low_water=write_low_water,
            monotonic=monotonic,
        )
        self._acceptor = Acceptor(self.admission, self.open_connections, env)
        self._listening: list[socket.socket] = []
        self._bound: dict[str, tuple[str, int]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self.closing = False

    async def start(self, only: Collection[str] | None = None) -> None:
        """Listen on every listener, or on those named in ``only`` (a node opens its controller
        listener before it has metadata to serve clients with); a later call opens the rest."""
        try:
            for listener in self.listeners:
                if listener.name in self._bound or (only is not None and listener.name not in only):
                    continue
                socks = await _listen(listener.host, listener.port)
                self._listening.extend(socks)
                self._bound[listener.name] = (listener.host, int(socks[0].getsockname()[1]))
                for sock in socks:
                    self._acceptor.accept_on(listener, sock)
        except BaseException:
            await self.close(timeout=0)
            raise
        if self._sweeper is None and self.idle_ms >= 0:  # connections.max.idle.ms -1: never
            self._sweeper = asyncio.get_running_loop().create_task(
                self.open_connections.sweep_idle(self.idle_ms, self.monotonic)
            )

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
        return [c.ctx for c in self.open_connections if c.ctx is not None]

    async def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, let pending responses be written (up to ``timeout`` seconds), then
        close every connection."""
        if self.closing:
            return
        self.closing = True
        self.open_connections.stop_taking()
        await self._acceptor.stop()
        for sock in self._listening:
            sock.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        await self.open_connections.close_all(timeout)

    # -- what the metrics layer and the node read (the parts hold it)

    @property
    def ip_throttle(self) -> Callable[[str], float] | None:
        """KIP-612 per-IP connection creation rate: ip -> seconds a new connection is held
        before it is closed unserved (0: serve it); None: no such quotas."""
        return self.admission.ip_throttle

    @ip_throttle.setter
    def ip_throttle(self, throttle: Callable[[str], float] | None) -> None:
        self.admission.ip_throttle = throttle

    @property
    def quotas(self) -> ConnectionQuotas:
        return self.admission.quotas

    @property
    def rejected(self) -> dict[str, int]:
        """Limit's config key -> connections closed at accept."""
        return self.admission.rejected

    @property
    def listener_stats(self) -> dict[str, ListenerStats]:
        return self.admission.listener_stats

    def listener_snapshot(self) -> dict[str, ListenerStats]:
        """A copy of each listener's acceptor counts (for a metrics scrape)."""
        return self.admission.listener_snapshot()

    @property
    def queued_request_bytes(self) -> int:
        return self.memory.queued_bytes

    @property
    def memory_full(self) -> bool:
        return self.memory.full

    @property
    def memory_depleted_seconds(self) -> float:
        """Seconds the request memory has spent at queued.max.request.bytes, in all."""
        return self.memory.depleted_seconds

    @property
    def connections_open(self) -> int:
        return self.counters.connections_open

    @property
    def connections_total(self) -> int:
        return self.counters.connections_total

    @property
    def requests(self) -> int:
        return self.counters.requests

    @property
    def bytes_in(self) -> int:
        return self.counters.bytes_in

    @property
    def bytes_out(self) -> int:
        return self.counters.bytes_out

    @property
    def idle_closed(self) -> int:
        return self.counters.idle_closed

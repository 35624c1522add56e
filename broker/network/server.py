"""The broker's listener: Kafka framing over asyncio, one `BufferedProtocol` per connection.

Requests are handed to an injected async handler as soon as their frame is complete, so several
requests of one connection can be served at once (clients pipeline), but responses are written in
request order, as the protocol requires: each request takes a slot in a per-connection queue and
the queue is flushed from its head. Memory per connection is bounded by ``max_inflight`` (slots,
answered or not, until written) and by the transport's write buffer high-water mark: past either,
reading pauses. A frame's buffer grows as its bytes arrive (see `FrameReader`).

Across connections, ``queued_max_request_bytes`` (queued.max.request.bytes) bounds the request
bytes the node holds, as Kafka's memory pool does: a large frame reserves its announced size when
its bytes start to arrive (its own array; a frame is never split), a small one its size when it is
complete, and both are given back once the response is written. At or past the bound no connection
starts a new frame, and every connection stops reading, except those in the middle of a frame
already reserved: they read it to its end, so reservations always complete and are given back.
The pool may go past its bound by one frame, like Kafka's (non-strict): the node holds at most the
bound plus ``socket.request.max.bytes``, plus the first bytes of frames buffered in each
connection's chunk. As in Kafka, a reservation lasts as long as its frame takes to arrive: with a
bound set, clients that announce large frames and send them slowly hold up the others (until
``connections.max.idle.ms`` closes them), which is why the default is no bound.

The server is the last line of defence: a bad frame size or a handler exception closes that one
connection, and nothing a client sends reaches the event loop's exception handler.
"""

import asyncio
import contextlib
import logging
import ssl
import struct
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, cast

from protocol.errors import FrameError
from protocol.framing import DEFAULT_MAX_FRAME_BYTES

from .framer import FrameReader

log = logging.getLogger(__name__)

Buffer: TypeAlias = bytes | bytearray | memoryview
# A response payload without its size prefix (response header included), as a list of buffers
# so large record data is written without being joined.
Response: TypeAlias = list[Buffer]
Handler: TypeAlias = Callable[["ConnectionContext", memoryview], Awaitable[Response | None]]

DEFAULT_MAX_INFLIGHT: Final = 100
DEFAULT_IDLE_MS: Final = 600_000  # connections.max.idle.ms
DEFAULT_WRITE_HIGH_WATER: Final = 4 * 1024 * 1024
DEFAULT_WRITE_LOW_WATER: Final = 1024 * 1024
UNLIMITED: Final = 2**31 - 1  # Kafka's Int.MaxValue default for the connection limits

_SIZE: Final = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # e.g. "PLAINTEXT", "INTERNAL"
    host: str
    port: int  # 0 = ephemeral; see KafkaServer.bound_ports
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    # Largest frame before the connection authenticates (SASL listeners:
    # sasl.server.max.receive.size); None: the server's limit from the start.
    pre_auth_max_bytes: int | None = None


class ConnectionContext:
    """What a handler knows about the connection a request came on."""

    __slots__ = (
        "_protocol",
        "connection_id",
        "listener",
        "peer",
        "peer_certificate",
        "security_protocol",
        "state",
    )

    def __init__(
        self,
        connection_id: str,
        listener: str,
        peer: tuple[str, int],
        security_protocol: str,
        protocol: "_Connection",
    ) -> None:
        self.connection_id = connection_id
        self.listener = listener
        self.peer = peer
        self.security_protocol = security_protocol
        self.state: dict[str, Any] = {}  # per-connection state owned by handlers (e.g. SASL)
        # TLS: the client's verified certificate (``SSLSocket.getpeercert()``), None without one
        self.peer_certificate: dict[str, Any] | None = None
        # Weak: a context kept by a handler must not keep a closed connection's buffers alive.
        self._protocol = weakref.ref(protocol)

    @property
    def peer_host(self) -> str:
        return self.peer[0]

    @property
    def closed(self) -> bool:
        protocol = self._protocol()
        return protocol is None or protocol.closing

    def close(self, *, fatal: bool = False) -> None:
        """Take no more requests; close once the responses of those already taken (the caller's
        own included) are written. For e.g. a failed SASL exchange: answer, then hang up.

        ``fatal``: the calling request itself was unacceptable (unreadable header, a request
        before authentication): requests the client pipelined after it are dropped unanswered,
        as Kafka closes the channel at the bad request."""
        protocol = self._protocol()
        if protocol is not None:
            protocol.request_close(fatal=fatal)

    def authenticated(self) -> None:
        """The client authenticated: frames up to the server's limit are accepted from now on."""
        protocol = self._protocol()
        if protocol is not None:
            protocol.lift_pre_auth_limit()

    def __repr__(self) -> str:
        return f"ConnectionContext({self.connection_id!r}, listener={self.listener!r})"


class _Slot:
    __slots__ = ("done", "response", "size", "task")

    def __init__(self, size: int) -> None:
        self.done = False
        self.response: Response | None = None
        self.size = size  # request bytes held until the response is written
        self.task: asyncio.Task[None] | None = None


# The slot of the request a handler is serving (each request runs in its own task/context).
_CURRENT_SLOT: ContextVar[_Slot | None] = ContextVar("kmirror_current_slot", default=None)


class _Connection(asyncio.BufferedProtocol):
    def __init__(self, server: "KafkaServer", listener: Listener) -> None:
        self._server = server
        self._listener = listener
        self._reader = FrameReader(listener.pre_auth_max_bytes or server.max_request_bytes)
        self._slots: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self._transport: asyncio.Transport | None = None
        self._reading = True
        self._write_paused = False
        self._draining = False  # server shutting down: take no new requests
        self._eof = False  # the client half-closed: answer what arrived, then close
        self._close_requested = False  # a handler asked to close after its response
        self._drained: asyncio.Future[None] | None = None
        self._throttled = False  # max.connection.creation.rate: not served until its turn
        # Bytes reserved in the server's request memory for the frame being received into its
        # own array (its announced size); moved to the frame's slot when the frame is complete.
        self._reserved = 0
        self.closing = False
        self.last_active = server.monotonic()
        self.ctx: ConnectionContext | None = None

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports don't subclass asyncio.Transport; they implement it.
        self._transport = transport = cast(asyncio.Transport, transport)
        server = self._server
        local = _addr(transport.get_extra_info("sockname"))
        peer = _addr(transport.get_extra_info("peername"))
        index = server._next_index()
        conn_id = f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{index}"
        self.ctx = ConnectionContext(
            conn_id, self._listener.name, peer, self._listener.security_protocol, self
        )
        if self._listener.ssl_context is not None:
            # connection_made comes after the TLS handshake, so the certificate is known here.
            self.ctx.peer_certificate = transport.get_extra_info("peercert") or None
        transport.set_write_buffer_limits(server.write_high_water, server.write_low_water)
        server._connection_opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self._transport = None
        for task in self._tasks:
            task.cancel()
        for slot in self._slots:
            self._server._release(slot)
        self._slots.clear()
        self._give_back_reservation()
        self._reader.release()  # the read buffers go now, not at the next full GC
        self._resolve_drained()
        self._server._connection_closed(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._reader.buffer_updated(nbytes)
        self._server.bytes_in += nbytes
        self.last_active = self._server.monotonic()
        self._take_frames()

    def eof_received(self) -> bool | None:
        # Half-closed by the client: answer what was received, then close.
        self._eof = True
        self._take_frames()
        return True

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._take_frames()

    # -- requests

    def _take_frames(self) -> None:
        server = self._server
        limit = server.max_inflight
        reader = self._reader
        if self._close_requested or self._draining:
            self._discard_frames()
        # Stop taking frames while writes are backed up, too: each one may add a response. With
        # the request memory full, only a frame already reserved is taken (it must complete).
        while (
            not self.closing
            and not self._draining
            and not self._close_requested
            and not self._write_paused
            and not self._throttled
            and len(self._slots) < limit
            and (self._reserved or not server.memory_full)
        ):
            try:
                frame = reader.next_frame()
            except FrameError as e:
                log.warning("closing %s: %s (%s)", self._name(), e, self._limit_name())
                self.shutdown(abort=True)
                return
            if frame is None:
                pending = reader.pending_size
                if pending and not self._reserved:
                    # A large frame started: reserve all of it, so it can always complete.
                    self._reserved = pending
                    server._reserve(pending)
                break
            self._dispatch(frame)
        if not self._slots and (self._close_requested or (self._eof and not self._write_paused)):
            self.shutdown(abort=False)  # transport.close() still flushes what was written
            return
        self._update_reading()

    def _discard_frames(self) -> None:
        # Keep reading (and dropping) requests until the close: closing a socket with unread
        # input sends a reset, which can destroy the responses the client has not read yet.
        try:
            while self._reader.next_frame() is not None:
                self._give_back_reservation()  # the frame it was for, if any, is dropped
        except FrameError:
            self.shutdown(abort=True)

    def _give_back_reservation(self) -> None:
        if self._reserved:
            self._server._unreserve(self._reserved)
            self._reserved = 0

    def _dispatch(self, frame: memoryview) -> None:
        slot = _Slot(len(frame))
        self._slots.append(slot)
        # The frame of a reservation (always the next one taken) keeps its bytes as its slot's.
        self._server._hold(slot, self._reserved)
        self._reserved = 0
        self._server.requests += 1
        task = asyncio.get_running_loop().create_task(self._serve(slot, frame))
        slot.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, slot: _Slot, frame: memoryview) -> None:
        ctx = self.ctx
        assert ctx is not None
        _CURRENT_SLOT.set(slot)
        try:
            response = await self._server.handler(ctx, frame)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("request handler failed; closing %s", self._name())
            self.shutdown(abort=False)
            return
        finally:
            # No cycle slot -> task -> its context -> slot: the request's memory (its frame,
            # its response) goes by reference counting, not at some later full collection.
            slot.task = None
            _CURRENT_SLOT.set(None)
        slot.response = response
        slot.done = True
        if not self.closing:
            self._flush()

    def _flush(self) -> None:
        transport = self._transport
        slots = self._slots
        freed = False
        while slots and slots[0].done:
            slot = slots.popleft()
            self._server._release(slot)
            response, slot.response = slot.response, None
            freed = True
            if response and transport is not None:
                size = 0
                for buf in response:
                    size += len(buf)
                transport.writelines([_SIZE.pack(size), *response])
                self._server.bytes_out += size + 4
        if freed:
            self.last_active = self._server.monotonic()
            if not slots:
                self._resolve_drained()
            self._take_frames()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self.closing:
            return
        want = (
            not self._eof
            and not self._write_paused
            and not self._throttled
            and len(self._slots) < self._server.max_inflight
            # a reserved frame is read to its end, whatever the memory
            and (not self._server.memory_full or self._reserved > 0)
        )
        if want != self._reading:
            self._reading = want
            if want:
                transport.resume_reading()
            else:
                transport.pause_reading()

    # -- shutdown

    @property
    def inflight(self) -> int:
        return len(self._slots)

    def shutdown(self, abort: bool) -> None:
        if self.closing:
            return
        self.closing = True
        for task in self._tasks:
            task.cancel()
        transport = self._transport
        if transport is not None:
            if abort:
                transport.abort()
            else:
                transport.close()

    def request_close(self, fatal: bool = False) -> None:
        if self.closing:
            return
        if fatal:
            self._drop_after(_CURRENT_SLOT.get())
        if self._close_requested:
            return
        self._close_requested = True
        if not self._slots:
            self.shutdown(abort=False)

    def _drop_after(self, current: _Slot | None) -> None:
        """Forget the requests that came after ``current``: they will not be answered."""
        if current is None or current not in self._slots:
            return
        while self._slots and self._slots[-1] is not current:
            slot = self._slots.pop()
            self._server._release(slot)
            if slot.task is not None:
                slot.task.cancel()
                slot.task = None

    def lift_pre_auth_limit(self) -> None:
        self._reader.set_max_size(self._server.max_request_bytes)

    def _limit_name(self) -> str:
        """The config key behind the frame size limit in force on this connection."""
        if self._reader.max_size == self._server.max_request_bytes:
            return "socket.request.max.bytes"
        return "sasl.server.max.receive.size, before SASL authentication"

    def start_draining(self) -> "asyncio.Future[None]":
        """Stop taking requests; the future resolves once every pending response is written."""
        self._draining = True
        self._update_reading()
        fut = asyncio.get_running_loop().create_future()
        self._drained = fut
        if not self._slots or self.closing:
            self._resolve_drained()
        return fut

    def resume_after_memory(self) -> None:
        self._take_frames()

    def throttle_for(self, seconds: float) -> None:
        """Serve nothing on this new connection for ``seconds`` (the accept throttle)."""
        self._throttled = True
        self._update_reading()
        asyncio.get_running_loop().call_later(seconds, self._end_throttle)

    def _end_throttle(self) -> None:
        self._throttled = False
        if not self.closing:
            self._take_frames()

    def _resolve_drained(self) -> None:
        fut = self._drained
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _name(self) -> str:
        return self.ctx.connection_id if self.ctx is not None else "connection"

    @property
    def peer_ip(self) -> str:
        return self.ctx.peer[0] if self.ctx is not None else ""

    @property
    def listener_name(self) -> str:
        return self._listener.name


def _addr(info: Any) -> tuple[str, int]:
    if isinstance(info, tuple) and len(info) >= 2:
        return str(info[0]), int(info[1])
    return "?", -1


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
        max_connection_creation_rate: float = UNLIMITED,
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
        # max.connections / max.connections.per.ip(.overrides): a connection past a limit is
        # closed at once (listeners in ``unlimited_listeners``, e.g. the controller's, exempt).
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(max_connections_per_ip_overrides or {})
        self.unlimited_listeners = unlimited_listeners
        self._per_ip: dict[str, int] = {}
        self.rejected: dict[str, int] = {}  # limit's config key -> connections closed at accept
        # max.connection.creation.rate (KIP-612): a token bucket of one second's worth; a
        # connection beyond it is accepted but served only when its turn comes, as Kafka's
        # acceptor throttles rather than refuses.
        self.creation_rate = max_connection_creation_rate
        self._tokens = float(max_connection_creation_rate)
        self._tokens_at = monotonic()
        self.accept_throttled = 0
        self.accept_throttle_seconds = 0.0
        self.monotonic = monotonic
        self.closing = False
        self._servers: list[asyncio.Server] = []
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
                server = await loop.create_server(
                    self._protocol_factory(listener),
                    listener.host,
                    listener.port,
                    ssl=listener.ssl_context,
                    reuse_address=True,
                )
                self._servers.append(server)
                sockname = server.sockets[0].getsockname()
                self._bound[listener.name] = (listener.host, int(sockname[1]))
        except BaseException:
            await self.close(timeout=0)
            raise
        if self._sweeper is None:
            self._sweeper = loop.create_task(self._sweep_idle())

    def _protocol_factory(self, listener: Listener) -> Callable[[], _Connection]:
        return lambda: _Connection(self, listener)

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
        for server in self._servers:
            server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        conns = list(self._connections)
        if conns and timeout > 0:
            waits = [c.start_draining() for c in conns]
            await asyncio.wait(waits, timeout=timeout)
        for c in conns:
            c.shutdown(abort=False)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)
        # Give transports a moment to report connection_lost so counters settle.
        for _ in range(100):
            if not self._connections:
                break
            await asyncio.sleep(0.01)

    # -- bookkeeping called by connections

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

    def _next_index(self) -> int:
        index = self._index
        self._index += 1
        return index

    def _connection_opened(self, conn: _Connection) -> None:
        if self.closing:
            conn.shutdown(abort=True)
            return
        over = self._over_limit(conn)
        if over is not None:
            limit, why = over
            n = self.rejected[limit] = self.rejected.get(limit, 0) + 1
            if n in (1, 10, 100) or n % 1000 == 0:  # a flood must not flood the log
                log.warning("closing new connection %s: %s (%d so far)", conn._name(), why, n)
            conn.shutdown(abort=True)
            return
        ip = conn.peer_ip
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        self._connections.add(conn)
        self.connections_open += 1
        self.connections_total += 1
        delay = self._creation_delay(conn)
        if delay > 0:
            self.accept_throttled += 1
            self.accept_throttle_seconds += delay
            conn.throttle_for(delay)

    def _creation_delay(self, conn: _Connection) -> float:
        """Seconds this new connection waits to stay within max.connection.creation.rate."""
        rate = self.creation_rate
        if rate >= UNLIMITED or conn.listener_name in self.unlimited_listeners:
            return 0.0
        now = self.monotonic()
        self._tokens = min(rate, self._tokens + (now - self._tokens_at) * rate)
        self._tokens_at = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / rate

    def _over_limit(self, conn: _Connection) -> tuple[str, str] | None:
        """(the limit's config key, why) when ``conn`` is one too many; None otherwise."""
        if conn.listener_name in self.unlimited_listeners:
            return None
        if self.connections_open >= self.max_connections:
            key = "max.connections"
            return key, f"{key} ({self.max_connections}) reached"
        ip = conn.peer_ip
        limit = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        if self._per_ip.get(ip, 0) >= limit:
            key = "max.connections.per.ip"
            return key, f"{key} ({limit}) reached for {ip}"
        return None

    def _connection_closed(self, conn: _Connection) -> None:
        if conn in self._connections:
            self._connections.discard(conn)
            self.connections_open -= 1
            ip = conn.peer_ip
            left = self._per_ip.get(ip, 1) - 1
            if left > 0:
                self._per_ip[ip] = left
            else:
                self._per_ip.pop(ip, None)

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

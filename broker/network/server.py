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

Each listening socket has its own accept task, so the connection limits (see
`connection_quotas`) are applied as Kafka's acceptor applies them: at ``max.connections`` a
listener stops accepting until a connection closes, past the creation rate it waits before the
next accept, and a connection over ``max.connections.per.ip`` is closed at once. Nothing is
checked after a connection is set up, so serving requests costs nothing for them. Idle
connections (``connections.max.idle.ms``) are found by one periodic sweep, not a timer each.

The server is the last line of defence: a bad frame size or a handler exception closes that one
connection, and nothing a client sends reaches the event loop's exception handler.
"""

import asyncio
import contextlib
import copy
import logging
import math
import socket
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

from .connection_quotas import UNLIMITED, ConnectionLimits, ConnectionQuotas, ListenerStats
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
ACCEPT_BACKLOG: Final = 128
ACCEPT_BATCH: Final = 64  # connections accepted in a row before the loop serves others

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

    def mute(self, seconds: float) -> None:
        """Read nothing more from this connection for ``seconds`` (client quota throttling,
        KIP-219: the response goes out now; requests already read are still served)."""
        protocol = self._protocol()
        if protocol is not None:
            protocol.mute(seconds)

    def muted_for(self) -> float:
        """Seconds until a `mute` ends (0: not muted)."""
        protocol = self._protocol()
        return 0.0 if protocol is None else protocol.muted_for()

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
    def __init__(self, server: "KafkaServer", listener: Listener, ip: str) -> None:
        self._server = server
        self._listener = listener
        self.ip = ip  # the peer's address, as counted by the connection quotas
        self.counted = True  # holds its place in the quotas until released
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
        # Bytes reserved in the server's request memory for the frame being received into its
        # own array (its announced size); moved to the frame's slot when the frame is complete.
        self._reserved = 0
        self.closing = False
        self.last_active = server.monotonic()
        self.ctx: ConnectionContext | None = None
        self._muted: asyncio.TimerHandle | None = None  # throttled by a client quota until

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
        if self._muted is not None:
            self._muted.cancel()
            self._muted = None
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
            and len(self._slots) < limit
            and (self._reserved or not server.memory_full)
            and self._muted is None
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
        if not self._slots and (
            self._close_requested or (self._eof and not self._write_paused and self._muted is None)
        ):
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
            and len(self._slots) < self._server.max_inflight
            # a reserved frame is read to its end, whatever the memory
            and (not self._server.memory_full or self._reserved > 0)
            and self._muted is None
        )
        if want != self._reading:
            self._reading = want
            if want:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def mute(self, seconds: float) -> None:
        if self.closing or seconds <= 0:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        if self._muted is not None:
            if self._muted.when() >= until:
                return
            self._muted.cancel()
        self._muted = loop.call_at(until, self._unmute)
        self._update_reading()

    def muted_for(self) -> float:
        m = self._muted
        return 0.0 if m is None else max(0.0, m.when() - asyncio.get_running_loop().time())

    def _unmute(self) -> None:
        self._muted = None
        self._take_frames()

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

    def _resolve_drained(self) -> None:
        fut = self._drained
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _name(self) -> str:
        return self.ctx.connection_id if self.ctx is not None else "connection"

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

    # -- accepting: one task per listening socket, as Kafka's acceptor

    async def _accept_loop(self, listener: Listener, lsock: socket.socket) -> None:
        # Accepts are drained without awaiting while nothing holds the listener back (a burst
        # costs no future per connection), a batch at a time so the loop serves others too.
        loop = asyncio.get_running_loop()
        lock = self._accept_locks.setdefault(listener.name, asyncio.Lock())
        batch = 0
        while not self.closing:
            try:
                sock, addr = lsock.accept()
            except (BlockingIOError, InterruptedError):
                batch = 0
                await _readable(loop, lsock)
                continue
            except OSError as e:  # e.g. out of file descriptors: try again shortly
                log.warning("accepting on listener %s failed: %s", listener.name, e)
                await asyncio.sleep(0.1)
                continue
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ip = _addr(addr)[0]
            try:
                if not lock.locked() and self._may_accept_now(listener.name):
                    self._start(listener, sock, ip)
                else:
                    async with lock:  # a listener's sockets (IPv4 and IPv6) take turns
                        await self._wait_to_accept(listener.name)
                        self._start(listener, sock, ip)
            except asyncio.CancelledError:
                sock.close()
                raise
            except Exception:  # never stop accepting for one connection's sake
                log.exception("setting up a connection on listener %s failed", listener.name)
                sock.close()
            batch += 1
            if batch >= ACCEPT_BATCH:
                batch = 0
                await asyncio.sleep(0)

    def _may_accept_now(self, listener: str) -> bool:
        quotas = self.quotas
        return (
            quotas.blocked(listener) is None
            and quotas.creation_wait(listener, self.monotonic()) <= 0
        )

    async def _wait_to_accept(self, name: str) -> None:
        """Wait for a place under max.connections and the creation rates."""
        quotas, stats = self.quotas, self.listener_stats[name]
        while True:
            blocked = quotas.blocked(name)
            if blocked is not None:
                stats.blocked_since = since = self.monotonic()
                self._log_blocked(name, blocked)
                try:
                    while quotas.blocked(name) is not None:
                        fut = asyncio.get_running_loop().create_future()
                        self._slot_waiters.append(fut)
                        await fut
                finally:
                    stats.blocked_since = None
                    stats.blocked_seconds += self.monotonic() - since
            wait = quotas.creation_wait(name, self.monotonic())
            if wait <= 0:
                return
            if math.isinf(wait):  # a rate of 0: nothing gets in
                wait = 1.0
            stats.throttled += 1
            stats.throttle_seconds += wait
            await asyncio.sleep(wait)

    def _start(self, listener: Listener, sock: socket.socket, ip: str) -> None:
        """Serve ``sock`` (its place is free now), or close it at once when ``ip`` has its
        max.connections.per.ip."""
        quotas, name = self.quotas, listener.name
        quotas.created(name, self.monotonic())
        if quotas.ip_refused(name, ip):
            key = "max.connections.per.ip"
            n = self.rejected[key] = self.rejected.get(key, 0) + 1
            if n in (1, 10, 100) or n % 1000 == 0:  # a flood must not flood the log
                log.warning(
                    "closing new connection from %s on %s: %s (%d) reached (%d so far)",
                    ip, name, key, quotas.ip_limit(ip), n,
                )  # fmt: skip
            _abort(sock)
            return
        ip_throttle = self.ip_throttle
        if ip_throttle is not None and not quotas.exempt(name):
            wait = ip_throttle(ip)
            if wait > 0:
                key = "connection_creation_rate"
                n = self.rejected[key] = self.rejected.get(key, 0) + 1
                if n in (1, 10, 100) or n % 1000 == 0:
                    log.warning(
                        "closing new connection from %s on %s in %.3f s: its %s quota reached "
                        "(%d so far)", ip, name, wait, key, n,
                    )  # fmt: skip
                asyncio.get_running_loop().call_later(wait, _abort, sock)  # as Kafka: held, closed
                return
        quotas.opened(name, ip)
        self.listener_stats[name].created += 1
        if quotas.over_node_limit():
            self._make_room(listener)
        conn = _Connection(self, listener, ip)
        task = asyncio.get_running_loop().create_task(self._serve_accepted(conn, sock))
        self._accepting.add(task)
        task.add_done_callback(self._accepting.discard)

    async def _serve_accepted(self, conn: _Connection, sock: socket.socket) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: conn, sock, ssl=conn._listener.ssl_context
            )
        except BaseException as e:
            if conn.ctx is None:  # never made (a failed TLS handshake): not lost either
                sock.close()
                self._release_quota(conn)
            if not isinstance(e, Exception):
                raise
            log.info("connection from %s on %s not set up: %s", conn.ip, conn.listener_name, e)

    def _make_room(self, listener: Listener) -> None:
        """The inter-broker listener went past max.connections: close the least recently active
        connection of another (non-exempt) listener."""
        quotas = self.quotas
        others = [
            c
            for c in self._connections
            if c.listener_name != listener.name and not quotas.exempt(c.listener_name)
            and not c.closing
        ]  # fmt: skip
        if others:
            victim = min(others, key=lambda c: c.last_active)
            log.info(
                "closing %s: max.connections (%d) reached and inter-broker listener %s connects",
                victim._name(), quotas.limits.max_connections, listener.name,
            )  # fmt: skip
            victim.shutdown(abort=False)

    def _log_blocked(self, listener: str, key: str) -> None:
        stats = self.listener_stats[listener]
        stats.blocked_times += 1
        n = stats.blocked_times
        if n in (1, 10, 100) or n % 1000 == 0:
            log.warning(
                "listener %s stops accepting until a connection closes: %s reached (%d times)",
                listener, key, n,
            )  # fmt: skip

    def _release_quota(self, conn: _Connection) -> None:
        """``conn`` gives back its place in the quotas (once); blocked listeners look again."""
        if not conn.counted:
            return
        conn.counted = False
        self.quotas.closed(conn.listener_name, conn.ip)
        self.listener_stats[conn.listener_name].closed += 1
        waiters, self._slot_waiters = self._slot_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def listener_snapshot(self) -> dict[str, ListenerStats]:
        """A copy of each listener's acceptor counts (for a metrics scrape)."""
        out = {name: copy.copy(stats) for name, stats in self.listener_stats.items()}
        now = self.monotonic()
        for stats in out.values():
            if stats.blocked_since is not None:  # a stop going on counts up to now
                stats.blocked_seconds += now - stats.blocked_since
        return out

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


async def _listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host:port``, one per address it resolves to (as asyncio's
    create_server binds them); non-blocking, with SO_REUSEADDR."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    socks: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, type_, proto, _, sockaddr in infos:
            if (family, sockaddr) in seen:
                continue
            seen.add((family, sockaddr))
            sock = socket.socket(family, type_, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(sockaddr)
            sock.listen(ACCEPT_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    if not socks:
        raise OSError(f"no address to listen on for {host}:{port}")
    return socks


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    """Wait until ``sock`` (a listening socket: a connection to accept) is readable."""
    fut = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    fd = sock.fileno()
    loop.add_reader(fd, ready)
    try:
        await fut
    finally:
        loop.remove_reader(fd)


def _abort(sock: socket.socket) -> None:
    """Close with a reset: a refused connection leaves nothing behind (no TIME_WAIT)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()

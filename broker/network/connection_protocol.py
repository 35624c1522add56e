"""One connection's asyncio `BufferedProtocol`: Kafka framing in, responses out in request order.

Requests are handed to the server's handler as soon as their frame is complete, so several
requests of one connection can be served at once (clients pipeline), but responses are written in
request order, as the protocol requires: each request takes a slot in a per-connection queue and
the queue is flushed from its head. Memory per connection is bounded by ``max_inflight`` (slots,
answered or not, until written) and by the transport's write buffer high-water mark: past either,
reading pauses. A frame's buffer grows as its bytes arrive (see `FrameReader`). The bytes a
request holds are accounted in the server's request memory (see `request_memory`).

A connection gets what it needs from its server as one `ConnectionEnv`, built once per server:
the handler, the request memory, the counters, the limits, and its `ConnectionOwner` (the table
of open connections) that it tells when it opens and closes.

This is the per-request hot path: keep it free of extra calls and indirection. A bad frame size
or a handler exception closes this one connection; nothing a client sends reaches the event
loop's exception handler.
"""

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast

from protocol.errors import FrameError

from .framer import FrameReader
from .handler import ConnectionContext, Handler, Response
from .listener import Listener
from .request_memory import RequestMemory
from .stats import ServerCounters

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")

_SIZE: Final = struct.Struct(">i")


class _Slot:
    __slots__ = ("done", "response", "size", "task")

    def __init__(self, size: int) -> None:
        self.done = False
        self.response: Response | None = None
        self.size = size  # request bytes held until the response is written
        self.task: asyncio.Task[None] | None = None


# The slot of the request a handler is serving (each request runs in its own task/context).
_CURRENT_SLOT: ContextVar[_Slot | None] = ContextVar("kmirror_current_slot", default=None)


class ConnectionOwner(Protocol):
    """What a connection tells its server: that it opened (it gets a number) and closed."""

    def next_index(self) -> int: ...
    def opened(self, conn: "Connection") -> None: ...
    def closed(self, conn: "Connection") -> None: ...


@dataclass(frozen=True, slots=True)
class ConnectionEnv:
    """What every connection of one server shares."""

    handler: Handler
    memory: RequestMemory
    counters: ServerCounters
    owner: ConnectionOwner
    max_request_bytes: int
    max_inflight: int
    write_high_water: int
    write_low_water: int
    monotonic: Callable[[], float]


class Connection(asyncio.BufferedProtocol):
    """One accepted connection; ``ip`` is its peer's address as the connection quotas count
    it (its place there is given back through ``env.owner`` when it closes)."""

    def __init__(self, env: ConnectionEnv, listener: Listener, ip: str) -> None:
        self._env = env
        # The parts read on every request, one attribute away.
        self._handler = env.handler
        self._memory = env.memory
        self._counters = env.counters
        self._monotonic = env.monotonic
        self._max_inflight = env.max_inflight
        self.listener = listener
        self.ip = ip  # the peer's address, as counted by the connection quotas
        self.counted = True  # holds its place in the quotas until released
        self._reader = FrameReader(listener.pre_auth_max_bytes or env.max_request_bytes)
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
        self.last_active = env.monotonic()
        self.ctx: ConnectionContext | None = None
        self._muted: asyncio.TimerHandle | None = None  # throttled by a client quota until

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports don't subclass asyncio.Transport; they implement it.
        self._transport = transport = cast(asyncio.Transport, transport)
        env, listener = self._env, self.listener
        local = address_of(transport.get_extra_info("sockname"))
        peer = address_of(transport.get_extra_info("peername"))
        index = env.owner.next_index()
        conn_id = f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{index}"
        self.ctx = ConnectionContext(conn_id, listener.name, peer, listener.security_protocol, self)
        if listener.ssl_context is not None:
            # connection_made comes after the TLS handshake, so the certificate is known here.
            self.ctx.peer_certificate = transport.get_extra_info("peercert") or None
        transport.set_write_buffer_limits(env.write_high_water, env.write_low_water)
        env.owner.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self._transport = None
        if self._muted is not None:
            self._muted.cancel()
            self._muted = None
        for task in self._tasks:
            task.cancel()
        for slot in self._slots:
            self._release(slot)
        self._slots.clear()
        self._give_back_reservation()
        self._reader.release()  # the read buffers go now, not at the next full GC
        self._resolve_drained()
        self._env.owner.closed(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._reader.buffer_updated(nbytes)
        self._counters.bytes_in += nbytes
        self.last_active = self._monotonic()
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
        memory = self._memory
        limit = self._max_inflight
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
            and (self._reserved or not memory.full)
            and self._muted is None
        ):
            try:
                frame = reader.next_frame()
            except FrameError as e:
                log.warning("closing %s: %s (%s)", self.name(), e, self._limit_name())
                self.shutdown(abort=True)
                return
            if frame is None:
                pending = reader.pending_size
                if pending and not self._reserved:
                    # A large frame started: reserve all of it, so it can always complete.
                    self._reserved = pending
                    memory.reserve(pending)
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
            self._memory.unreserve(self._reserved)
            self._reserved = 0

    def _dispatch(self, frame: memoryview) -> None:
        size = len(frame)
        slot = _Slot(size)
        self._slots.append(slot)
        # The slot's bytes are held until its response is written; the frame of a reservation
        # (always the next one taken) has its bytes held already.
        self._memory.reserve(size - self._reserved)
        self._reserved = 0
        self._counters.requests += 1
        task = asyncio.get_running_loop().create_task(self._serve(slot, frame))
        slot.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, slot: _Slot, frame: memoryview) -> None:
        ctx = self.ctx
        assert ctx is not None
        _CURRENT_SLOT.set(slot)
        try:
            response = await self._handler(ctx, frame)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("request handler failed; closing %s", self.name())
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
        memory = self._memory
        freed = False
        while slots and slots[0].done:
            slot = slots.popleft()
            size, slot.size = slot.size, 0
            memory.unreserve(size)
            response, slot.response = slot.response, None
            freed = True
            if response and transport is not None:
                size = 0
                for buf in response:
                    size += len(buf)
                transport.writelines([_SIZE.pack(size), *response])
                self._counters.bytes_out += size + 4
        if freed:
            self.last_active = self._monotonic()
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
            and len(self._slots) < self._max_inflight
            # a reserved frame is read to its end, whatever the memory
            and (not self._memory.full or self._reserved > 0)
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
            self._release(slot)
            if slot.task is not None:
                slot.task.cancel()
                slot.task = None

    def _release(self, slot: _Slot) -> None:
        """Give back the request bytes ``slot`` holds (once)."""
        size, slot.size = slot.size, 0
        self._memory.unreserve(size)

    def lift_pre_auth_limit(self) -> None:
        self._reader.set_max_size(self._env.max_request_bytes)

    def _limit_name(self) -> str:
        """The config key behind the frame size limit in force on this connection."""
        if self._reader.max_size == self._env.max_request_bytes:
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

    def name(self) -> str:
        """The connection's id, for log lines."""
        return self.ctx.connection_id if self.ctx is not None else "connection"

    @property
    def listener_name(self) -> str:
        return self.listener.name


def address_of(info: Any) -> tuple[str, int]:
    """(host, port) of a socket address (``getpeername``/``accept``), ("?", -1) if unknown."""
    if isinstance(info, tuple) and len(info) >= 2:
        return str(info[0]), int(info[1])
    return "?", -1

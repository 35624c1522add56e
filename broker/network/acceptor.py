"""Accepting connections: one task per listening socket, applying the connection limits (see
`connection_quotas`) as Kafka's acceptor applies them.

At ``max.connections`` a listener stops accepting until a connection closes, past the creation
rate it waits before the next accept, and a connection over ``max.connections.per.ip`` is closed
at once (as is one over its KIP-612 per-IP creation rate quota, after the quota's delay).
Nothing is checked after a connection is set up, so serving requests costs nothing for them.
"""

import asyncio
import contextlib
import copy
import logging
import math
import socket
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, cast

from .connection_protocol import _addr, _Connection
from .connection_quotas import ConnectionQuotas, ListenerStats
from .listener import Listener

if TYPE_CHECKING:
    from .server import KafkaServer

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")

ACCEPT_BATCH: Final = 64  # connections accepted in a row before the loop serves others


class Acceptor:
    """`KafkaServer`'s accepting side (a mixin: the state is the server's, set up by it)."""

    closing: bool
    monotonic: Callable[[], float]
    quotas: ConnectionQuotas
    rejected: dict[str, int]
    ip_throttle: Callable[[str], float] | None
    listener_stats: dict[str, ListenerStats]
    _slot_waiters: list[asyncio.Future[None]]
    _accept_locks: dict[str, asyncio.Lock]
    _accepting: set[asyncio.Task[None]]
    _connections: set[_Connection]

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
        conn = _Connection(cast("KafkaServer", self), listener, ip)
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

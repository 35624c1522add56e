"""Accepting connections: one task per listening socket, as Kafka's acceptor, each new
connection let in by the node's `Admission` (the connection limits) and served as a
`Connection` that reports to the server's `OpenConnections`.
"""

import asyncio
import contextlib
import logging
import socket
from typing import Final

from .admission import Admission
from .connection_protocol import Connection, ConnectionEnv, address_of
from .listener import Listener
from .open_connections import OpenConnections

# The name the code logged under before server.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.network.server")

ACCEPT_BATCH: Final = 64  # connections accepted in a row before the loop serves others


class Acceptor:
    """The accepting side of a server: ``env`` is what its new connections share."""

    def __init__(self, admission: Admission, connections: OpenConnections, env: ConnectionEnv):
        self._admission = admission
        self._connections = connections
        self._env = env
        self._accept_locks: dict[str, asyncio.Lock] = {}
        # accept loops and connections being set up (a TLS handshake)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False

    def accept_on(self, listener: Listener, sock: socket.socket) -> None:
        """Accept connections from the listening socket ``sock`` until `stop`."""
        self._track(asyncio.get_running_loop().create_task(self._accept_loop(listener, sock)))

    async def stop(self) -> None:
        """Stop accepting; returns once no task watches a listening socket any more."""
        self._stopped = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:  # they stop watching the listening sockets before these are closed
            await asyncio.wait(tasks, timeout=1.0)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept_loop(self, listener: Listener, lsock: socket.socket) -> None:
        # Accepts are drained without awaiting while nothing holds the listener back (a burst
        # costs no future per connection), a batch at a time so the loop serves others too.
        loop = asyncio.get_running_loop()
        admission = self._admission
        lock = self._accept_locks.setdefault(listener.name, asyncio.Lock())
        batch = 0
        while not self._stopped:
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
            ip = address_of(addr)[0]
            try:
                if not lock.locked() and admission.may_accept_now(listener.name):
                    self._start(listener, sock, ip)
                else:
                    async with lock:  # a listener's sockets (IPv4 and IPv6) take turns
                        await admission.wait_to_accept(listener.name)
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

    def _start(self, listener: Listener, sock: socket.socket, ip: str) -> None:
        """Serve ``sock`` (its place is free now), unless the admission refuses it."""
        if not self._admission.admit(listener.name, sock, ip):
            return
        if self._admission.quotas.over_node_limit():
            self._make_room(listener)
        conn = Connection(self._env, listener, ip)
        self._track(asyncio.get_running_loop().create_task(self._serve_accepted(conn, sock)))

    async def _serve_accepted(self, conn: Connection, sock: socket.socket) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: conn, sock, ssl=conn.listener.ssl_context
            )
        except BaseException as e:
            if conn.ctx is None:  # never made (a failed TLS handshake): not lost either
                sock.close()
                self._admission.release(conn)
            if not isinstance(e, Exception):
                raise
            log.info("connection from %s on %s not set up: %s", conn.ip, conn.listener_name, e)

    def _make_room(self, listener: Listener) -> None:
        """The inter-broker listener went past max.connections: close the least recently active
        connection of another (non-exempt) listener."""
        quotas = self._admission.quotas
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
                victim.name(), quotas.limits.max_connections, listener.name,
            )  # fmt: skip
            victim.shutdown(abort=False)


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
